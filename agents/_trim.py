"""Keep long outputs (tool results, run logs) from flooding a model's context.

:class:`TrimContextMiddleware` shortens long texts in the messages the wrapped agent sees to
their head and tail; the chat transcript keeps the full text.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core import UserError
from ..core import trim_middle as trim_text
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


class TrimContextMiddleware:
    """Shows the wrapped agent long texts trimmed to ``max_chars`` (head + tail)."""

    name = "trim_context"

    def __init__(self, max_chars: int = 4000) -> None:
        if max_chars < 100:
            raise UserError(f"max_chars must be >= 100 (got {max_chars})")
        self.max_chars = max_chars

    async def __call__(
        self, messages: Sequence[Message], options: GenerateReplyOptions, agent: Agent
    ) -> Message:
        trimmed = [trim_message(message, self.max_chars) for message in messages]
        return await agent.generate_reply(trimmed, options)
