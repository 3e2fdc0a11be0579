"""Chat messages: what agents say to each other.

Every message records who said it (``sender``, AutoGen's ``From``), its chat role, optional
structured ``data`` (a review verdict, a run result) so that workflow conditions need not
parse text, the token ``usage`` of the model call that produced it, and a ``terminate`` flag.
Every message also has a ``content`` text view used for printing, role-play history and
termination tests.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny

TERMINATE = "[GROUPCHAT_TERMINATE]"
"""A message whose whole content (trimmed) is this marker ends a group chat."""

CLEAR_MESSAGES = "[GROUPCHAT_CLEAR_MESSAGES]"
"""A message whose whole content (trimmed) is this marker drops the history before it."""

Role = Literal["user", "assistant", "system", "tool"]


class Usage(BaseModel):
    """Tokens spent by one model call (or a sum of calls)."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    estimated: bool = False
    """Some of these tokens were estimated (the endpoint reported no usage, or a request
    ended without a reply)."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            estimated=self.estimated or other.estimated,
        )


def add_usage(total: Usage | None, extra: Usage | None) -> Usage | None:
    """Sum two optional usages; ``None`` only when both are ``None``."""
    if total is None:
        return extra
    if extra is None:
        return total
    return total + extra


class _MessageBase(BaseModel):
    model_config = ConfigDict(frozen=True)

    sender: str | None = None
    """Name of the agent (or person) that produced the message."""
    data: dict[str, Any] | SerializeAsAny[BaseModel] | None = None
    """Optional structured payload, e.g. a review verdict or a run result."""
    usage: Usage | None = None
    """Tokens spent by the model call that produced this message, when a model did."""
    terminate: bool = False
    """Set to end a group chat regardless of the content."""
    notes: list[str] = Field(default_factory=list)
    """What was done to make sense of the model's reply (a repaired call, an empty reply
    asked again …); kept for the transcript, never sent to a model."""


class TextMessage(_MessageBase):
    """Plain text from a user, an agent or the system."""

    type: Literal["text"] = "text"
    role: Role = "assistant"
    content: str = ""


class ToolCall(BaseModel):
    """One function call requested by a model; ``arguments`` is the raw JSON text."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str


class ToolCallResult(BaseModel):
    """The outcome of one function call, answering the call with the same ``id``."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    content: str
    ok: bool = True


class ToolCallMessage(_MessageBase):
    """A model asking for one or more function calls (with optional accompanying text)."""

    type: Literal["tool_calls"] = "tool_calls"
    role: Role = "assistant"
    tool_calls: list[ToolCall]
    text: str | None = None

    @property
    def content(self) -> str:
        return self.text or ""


class ToolResultMessage(_MessageBase):
    """Results of function calls; the content view joins the results' texts."""

    type: Literal["tool_results"] = "tool_results"
    role: Role = "tool"
    results: list[ToolCallResult]

    @property
    def content(self) -> str:
        return "\n".join(result.content for result in self.results)


class AggregateMessage(_MessageBase):
    """Function calls made by a model together with their results (one reply of an agent)."""

    type: Literal["aggregate"] = "aggregate"
    role: Role = "assistant"
    tool_calls: list[ToolCall]
    results: list[ToolCallResult]
    text: str | None = None

    @property
    def content(self) -> str:
        return "\n".join(result.content for result in self.results)

    @property
    def call_message(self) -> ToolCallMessage:
        return ToolCallMessage(
            tool_calls=self.tool_calls, text=self.text, sender=self.sender, usage=self.usage
        )

    @property
    def result_message(self) -> ToolResultMessage:
        return ToolResultMessage(results=self.results, sender=self.sender)


Message = Annotated[
    TextMessage | ToolCallMessage | ToolResultMessage | AggregateMessage,
    Field(discriminator="type"),
]
"""Any chat message; serializes with a ``type`` tag so transcripts round-trip."""


def is_clear(message: Message) -> bool:
    """True when the whole trimmed content is ``[GROUPCHAT_CLEAR_MESSAGES]``."""
    return message.content.strip() == CLEAR_MESSAGES


def terminate_message(sender: str | None, *, usage: Usage | None = None) -> TextMessage:
    """The hard-coded message that ends a chat (content = marker, flag set)."""
    return TextMessage(content=TERMINATE, sender=sender, terminate=True, usage=usage)


def with_sender(message: Message, sender: str) -> Message:
    """The same message stamped with ``sender`` (unchanged if it already has one)."""
    if message.sender is not None:
        return message
    return message.model_copy(update={"sender": sender})
