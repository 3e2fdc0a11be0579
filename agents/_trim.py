"""Keep long outputs (tool results, run logs) and long chats within a model's context.

:class:`TrimContextMiddleware` shortens long texts in the messages the wrapped agent sees to
their head and tail and, given a context size, leaves out the oldest turns that do not fit;
the chat transcript keeps everything.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core import UserError, trim_middle as trim_text
from ._agent import Agent, GenerateReplyOptions
from ._messages import (
    AggregateMessage,
    Message,
    TextMessage,
    ToolCallMessage,
    ToolResultMessage,
)


def trim_message(message: Message, max_chars: int) -> Message:
    """The message with every long text (content, tool results) trimmed."""
    if isinstance(message, TextMessage):
        if len(message.content) <= max_chars:
            return message
        return message.model_copy(update={"content": trim_text(message.content, max_chars)})
    if isinstance(message, ToolCallMessage):
        if message.text is None or len(message.text) <= max_chars:
            return message
        return message.model_copy(update={"text": trim_text(message.text, max_chars)})
    if isinstance(message, ToolResultMessage | AggregateMessage):
        if all(len(result.content) <= max_chars for result in message.results):
            return message
        results = [
            result.model_copy(update={"content": trim_text(result.content, max_chars)})
            for result in message.results
        ]
        return message.model_copy(update={"results": results})
    return message


OMITTED_NOTE = "[{count} earlier message(s) left out to fit the model's context]"


def _size(message: Message) -> int:
    text = message.content
    calls = getattr(message, "tool_calls", [])
    return len(text) + sum(len(call.arguments) + len(call.name) for call in calls)


def fit_context(
    messages: Sequence[Message], max_total_chars: int, keep_first: int
) -> list[Message]:
    """The messages with the oldest turns left out until they fit ``max_total_chars``.

    Always kept: system messages, the first ``keep_first`` other messages (the introductions
    and the task) and the latest message of every sender (the latest code, review and run).
    What was left out is replaced by one note saying how many messages were dropped.
    """
    total = sum(_size(message) for message in messages)
    if total <= max_total_chars:
        return list(messages)
    kept = set(range(len(messages)))
    head = [i for i, m in enumerate(messages) if not _is_system(m)][:keep_first]
    latest = {m.sender: i for i, m in enumerate(messages)}
    protected = {i for i, m in enumerate(messages) if _is_system(m)} | set(head)
    protected |= set(latest.values())
    for index in range(len(messages)):
        if total <= max_total_chars:
            break
        if index in protected:
            continue
        kept.discard(index)
        total -= _size(messages[index])
    dropped = len(messages) - len(kept)
    result: list[Message] = []
    noted = False
    for index, message in enumerate(messages):
        if index in kept:
            result.append(message)
        elif not noted:
            result.append(TextMessage(role="user", content=OMITTED_NOTE.format(count=dropped)))
            noted = True
    return result


def _is_system(message: Message) -> bool:
    return isinstance(message, TextMessage) and message.role == "system"


class TrimContextMiddleware:
    """Shows the wrapped agent long texts trimmed to ``max_chars`` (head + tail) and, when
    ``max_total_chars`` is given, only as many turns as fit it (see :func:`fit_context`;
    ``keep_first`` leading messages, such as introductions and the task, always stay)."""

    name = "trim_context"

    def __init__(
        self,
        max_chars: int = 4000,
        *,
        max_total_chars: int | None = None,
        keep_first: int = 1,
    ) -> None:
        problems: list[str] = []
        if max_chars < 100:
            problems.append(f"max_chars must be >= 100 (got {max_chars})")
        if max_total_chars is not None and max_total_chars < max_chars:
            problems.append(
                f"max_total_chars must be >= max_chars (got {max_total_chars} < {max_chars})"
            )
        if keep_first < 0:
            problems.append(f"keep_first must be >= 0 (got {keep_first})")
        if problems:
            raise UserError("TrimContextMiddleware: " + "; ".join(problems))
        self.max_chars = max_chars
        self.max_total_chars = max_total_chars
        self.keep_first = keep_first

    async def __call__(
        self, messages: Sequence[Message], options: GenerateReplyOptions, agent: Agent
    ) -> Message:
        trimmed = [trim_message(message, self.max_chars) for message in messages]
        if self.max_total_chars is not None:
            trimmed = fit_context(trimmed, self.max_total_chars, self.keep_first)
        return await agent.generate_reply(trimmed, options)
