"""The admin's completion signal: its plain ``[COMPLETE]`` becomes a typed terminate message."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from sandcrew.agents import Agent, GenerateReplyOptions, Message, TextMessage
from sandcrew.crew._prompts import COMPLETE_SIGNAL


class FinalAnswer(BaseModel):
    """The admin's answer to the task, attached to its terminate message."""

    model_config = ConfigDict(frozen=True)

    kind: str = "final_answer"
    answer: str


def split_completion(text: str) -> str | None:
    """The answer when ``text`` ends with the completion signal on its own line, else None.

    Only a whole line counts: a sentence that merely mentions the signal is not one.
    """
    lines = [line.strip() for line in text.strip().splitlines()]
    if not lines or lines[-1] != COMPLETE_SIGNAL:
        return None
    return "\n".join(lines[:-1]).strip()


class CompletionMiddleware:
    """Turns an admin reply that ends with ``[COMPLETE]`` into a terminate message."""

    name = "completion"

    async def __call__(
        self, messages: Sequence[Message], options: GenerateReplyOptions, agent: Agent
    ) -> Message:
        reply = await agent.generate_reply(messages, options)
        answer = split_completion(reply.content)
        if answer is None:
            return reply
        return TextMessage(
            content=answer,
            sender=reply.sender or agent.name,
            terminate=True,
            usage=reply.usage,
            data=FinalAnswer(answer=answer),
        )
