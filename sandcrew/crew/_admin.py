"""The admin's completion signal: its plain ``[COMPLETE]`` becomes a typed terminate message.

How the signal is read (loosely, the way real models write it) is decided by the stop policy
(:func:`sandcrew.agents.read_completion`); this middleware only applies it to the admin.
"""

from __future__ import annotations

from collections.abc import Sequence

from sandcrew.agents import (
    COMPLETE_SIGNAL,
    Agent,
    FinalAnswer,
    GenerateReplyOptions,
    Message,
    TextMessage,
    read_completion,
)


class CompletionMiddleware:
    """Turns an admin reply that ends with the completion signal into a terminate message
    carrying the :class:`~sandcrew.agents.FinalAnswer` (the text without the signal); code
    the admin repeats after the signal must be code of an earlier message."""

    name = "completion"

    def __init__(self, signal: str = COMPLETE_SIGNAL) -> None:
        self.signal = signal

    async def __call__(
        self, messages: Sequence[Message], options: GenerateReplyOptions, agent: Agent
    ) -> Message:
        reply = await agent.generate_reply(messages, options)
        # Code repeated after the signal must be code the others already wrote.
        earlier = [message.content for message in messages if message.sender != agent.name]
        answer = read_completion(reply.content, self.signal, earlier=earlier)
        if answer is None:
            return reply
        return TextMessage(
            content=reply.content,
            sender=reply.sender or agent.name,
            terminate=True,
            usage=reply.usage,
            data=FinalAnswer(answer=answer),
        )
