"""How one solve went: the one outcome every surface reports.

``sandcrew solve --json`` prints its dump, a transcript's closing event holds it, the MCP
``solve`` tool returns it and a suite's crew solver keeps it per task. Only the chat's
messages and the exception that ended it stay out of the dump: the transcript has the
messages, and the dump names the error in words.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, model_validator
from pydantic.json_schema import SkipJsonSchema

from sandcrew.agents import Message, StopReason
from sandcrew.sandbox import ExecutionResult

RESULT_FORMAT: Literal[1] = 1
"""Version of the outcome's JSON; bumped only on incompatible changes."""


class CrewResult(BaseModel):
    """How one task went; ``model_dump(mode="json")`` is the ``solve --json`` document."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    format: Literal[1] = RESULT_FORMAT
    task: str
    solved: bool
    """The admin declared the task answered after a successful run (the stop policy's
    :func:`~sandcrew.agents.is_solved`)."""
    answer: str | None
    stop_reason: StopReason
    stop_detail: str
    rounds: int
    """Agent replies in the chat (the chat's own count)."""
    total_tokens: int
    tokens_estimated: bool = False
    """Some of ``total_tokens`` were estimated (the endpoint reported no usage, or a request
    ended without a reply)."""
    duration: float
    runs: list[ExecutionResult]
    last_code: str | None = None
    """The last code block the coder wrote (what a suite checks for code tasks)."""
    error: str | None = None
    """What broke the chat (the model endpoint, the infrastructure), in words."""
    notes: list[str] = Field(default_factory=list)
    """What the chat decided on its own, e.g. a fallback speaker and why."""
    messages: SkipJsonSchema[list[Message]] = Field(default_factory=list, exclude=True, repr=False)
    """The whole chat, in this process only (a transcript keeps it on disk)."""
    exception: SkipJsonSchema[BaseException | None] = Field(default=None, exclude=True, repr=False)
    """The exception behind ``error``, in this process only (it decides the exit code)."""

    @field_serializer("duration")
    def _rounded(self, duration: float) -> float:
        return round(duration, 3)

    @model_validator(mode="before")
    @classmethod
    def _error_in_words(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("exception") is not None and not data.get("error"):
            return {**data, "error": str(data["exception"])}
        return data
