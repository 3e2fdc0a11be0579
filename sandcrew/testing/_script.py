"""The script a :class:`ScriptedModelServer` answers from: a list of turns.

A turn says which requests it answers (``agent``, ``system``, ``contains``, ``when``) and what
to answer (text, tool calls, a refusal, an HTTP error, or a raw body such as the HTML page of
a misconfigured proxy), optionally after a delay. Scripts
load from YAML or JSON so users can replay scripted conversations against their own setup::

    turns:
      - agent: teacher
        content: "What is 2 + 3?"
      - agent: student
        content: "5"
      - agent: reviewer
        tool_calls:
          - name: review_code_block
            arguments: {has_multiple_code_blocks: false}
      - status: 500          # an error the client should retry
        retry_after: 0.01
      - raw_body: "<html><body>Welcome to nginx!</body></html>"
        content_type: text/html
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from sandcrew.agents._chat_format import content_text
from sandcrew.core import summarize_problem


class ScriptedToolCall(BaseModel):
    """A tool call the scripted model makes; ``arguments`` may be a JSON text or an object.

    ``as_object`` sends the arguments as a JSON object on the wire instead of the JSON string
    the API specifies (as some servers do).
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: str | dict[str, Any] = "{}"
    id: str | None = None
    as_object: bool = False

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)

    def wire_arguments(self) -> str | dict[str, Any]:
        """What the ``arguments`` field carries in the response."""
        if not self.as_object:
            return self.arguments_json()
        value = json.loads(self.arguments_json())
        return value if isinstance(value, dict) else self.arguments_json()


class Turn(BaseModel):
    """One scripted answer and the requests it may answer.

    Matching (all given conditions must hold):
      * ``agent`` — the request's ``X-Sandcrew-Agent`` header equals it;
      * ``system`` — the first system message contains this text (without one: the first
        message, where instructions folded into the first user turn are);
      * ``contains`` — the last message's text contains this text;
      * ``tools`` — the request offers tools (``true``) or none (``false``);
      * ``tool_choice`` — the request's tool choice is this form: ``auto``, ``required``,
        ``none``, ``named`` (a function by name) or ``absent``;
      * ``when`` — a predicate over the parsed request body (Python only, not from files).

    Answer: ``raw_body`` (sent as is with ``content_type``, default ``text/plain``, and
    ``status``, default 200 — e.g. the HTML page a proxy returns at a wrong base URL), else
    ``status`` (an HTTP error such as 500 or 429, with ``error_message`` and an optional
    ``retry_after`` in seconds), else ``refusal``, else ``tool_calls`` and/or ``content``.
    ``usage`` overrides the computed token counts and ``omit_usage`` leaves them out (as many
    local servers do); ``delay`` waits before answering; ``times`` lets one turn answer
    several requests.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    agent: str | None = None
    system: str | None = None
    contains: str | None = None
    tools: bool | None = None
    tool_choice: Literal["auto", "required", "none", "named", "absent"] | None = None
    when: Callable[[dict[str, Any]], bool] | None = Field(default=None, exclude=True)

    content: str | None = None
    raw_body: str | None = None
    content_type: str | None = None
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    refusal: str | None = None
    status: int | None = None
    error_message: str = "scripted error"
    retry_after: float | None = None
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    omit_usage: bool = False
    delay: float = 0.0
    times: int = Field(default=1, ge=1)

    @field_validator("status")
    @classmethod
    def _error_status(cls, value: int | None) -> int | None:
        if value is not None and not 400 <= value <= 599:
            raise ValueError(f"status must be an HTTP error code 400-599 (got {value})")
        return value

    @model_validator(mode="after")
    def _content_type_needs_raw_body(self) -> Turn:
        if self.content_type is not None and self.raw_body is None:
            raise ValueError("content_type only applies to raw_body; set raw_body too")
        return self

    def matches(self, body: Mapping[str, Any], agent: str | None) -> bool:
        if self.agent is not None and self.agent != agent:
            return False
        if self.system is not None and self.system not in system_prompt(body):
            return False
        if self.contains is not None and self.contains not in last_message_text(body):
            return False
        if self.tools is not None and self.tools != bool(body.get("tools")):
            return False
        if self.tool_choice is not None and self.tool_choice != tool_choice_form(body):
            return False
        return self.when is None or bool(self.when(dict(body)))

    def describe(self) -> str:
        conditions = [
            f"{key}={value!r}"
            for key, value in (
                ("agent", self.agent),
                ("system", self.system),
                ("contains", self.contains),
                ("tools", self.tools),
                ("tool_choice", self.tool_choice),
            )
            if value is not None
        ]
        if self.when is not None:
            conditions.append("when=<predicate>")
        if self.raw_body is not None:
            answer = f"raw {self.content_type or 'text/plain'} body, HTTP {self.status or 200}"
        elif self.status is not None:
            answer = f"HTTP {self.status}"
        elif self.tool_calls:
            answer = "tool calls " + ", ".join(call.name for call in self.tool_calls)
        else:
            answer = repr((self.content or self.refusal or "")[:40])
        return f"[{' '.join(conditions) or 'any request'}] -> {answer}"


def tool_choice_form(body: Mapping[str, Any]) -> str:
    """The form of a request's ``tool_choice``: auto, required, none, named or absent."""
    choice = body.get("tool_choice")
    if choice is None:
        return "absent"
    if isinstance(choice, Mapping):
        return "named"
    return str(choice)


def system_prompt(body: Mapping[str, Any]) -> str:
    """The first system message's text; without one, the first message's (where a server
    without a system role gets the instructions folded into the first user turn)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    for message in messages:
        if message.get("role") in ("system", "developer"):
            return content_text(message.get("content"))
    return content_text(messages[0].get("content")) if messages else ""


def last_message_text(body: Mapping[str, Any]) -> str:
    messages = body.get("messages") or []
    if not messages or not isinstance(messages[-1], Mapping):
        return ""
    return content_text(messages[-1].get("content"))


def load_script(source: str | Path | list[Any] | Mapping[str, Any]) -> list[Turn]:
    """Turns from a YAML/JSON file, or from already-parsed data.

    The document is either a list of turns or a mapping with a ``turns`` list.
    """
    data: Any = source
    origin = "script data"
    if isinstance(source, str | Path):
        path = Path(source)
        origin = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise ValueError(f"cannot read script {path}: {error.strerror}") from error
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    if isinstance(data, Mapping):
        data = data.get("turns")
    if not isinstance(data, list):
        raise ValueError(f"{origin}: expected a list of turns or a mapping with 'turns'")
    turns: list[Turn] = []
    problems: list[str] = []
    for index, item in enumerate(data):
        try:
            turns.append(Turn.model_validate(item))
        except ValidationError as error:
            details = "; ".join(
                summarize_problem(problem, whole="turn") for problem in error.errors()
            )
            problems.append(f"turn {index}: {details}")
    if problems:
        raise ValueError(f"{origin} has invalid turns:\n" + "\n".join(problems))
    return turns
