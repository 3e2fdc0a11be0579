"""An in-process agent that answers from a list, for chat tests that need no model."""

from __future__ import annotations

from collections.abc import Sequence

from sandcrew.agents import BaseAgent, GenerateReplyOptions, Message, TextMessage


class ScriptedAgent(BaseAgent):
    """Replies with ``replies`` in order (strings become text messages from this agent).

    Every call is recorded in ``received`` (the history it saw) and ``options``. Running out
    of replies raises ``AssertionError`` so an unexpected extra turn fails the test.
    """

    def __init__(
        self,
        name: str,
        replies: Sequence[str | Message] = (),
        *,
        description: str | None = None,
    ) -> None:
        super().__init__(name, description=description)
        self._replies = list(replies)
        self.received: list[list[Message]] = []
        self.options: list[GenerateReplyOptions | None] = []

    @property
    def remaining(self) -> int:
        return len(self._replies)

    async def generate_reply(
        self, messages: Sequence[Message], options: GenerateReplyOptions | None = None
    ) -> Message:
        self.received.append(list(messages))
        self.options.append(options)
        if not self._replies:
            raise AssertionError(
                f"ScriptedAgent {self.name!r} has no reply left for call #{len(self.received)}"
            )
        reply = self._replies.pop(0)
        if isinstance(reply, str):
            return TextMessage(content=reply, sender=self.name)
        return reply
