"""A whole group chat as one agent, and two-agent conversations built on round robin."""

from __future__ import annotations

from collections.abc import Sequence

from ..core import UserError
from ._agent import Agent, BaseAgent, GenerateReplyOptions
from ._group_chat import ChatResult, ChatStream, GroupChat
from ._messages import Message, TextMessage
from ._stop_policy import StopReason


class GroupChatManager(BaseAgent):
    """Wraps a :class:`GroupChat` as an agent: a reply runs the chat on the given messages
    (up to ``max_round`` replies) and answers with the chat's last message, re-signed with
    the manager's name and carrying the chat's total token usage. A chat that ended with an
    error re-raises it. ``last_result`` keeps the full :class:`ChatResult`."""

    def __init__(
        self,
        chat: GroupChat,
        *,
        name: str = "chat_manager",
        max_round: int = 10,
        description: str | None = None,
    ) -> None:
        super().__init__(name, description=description)
        self.chat = chat
        self.max_round = max_round
        self.last_result: ChatResult | None = None

    async def generate_reply(
        self, messages: Sequence[Message], options: GenerateReplyOptions | None = None
    ) -> Message:
        result = await self.chat.call(messages, self.max_round)
        self.last_result = result
        if result.stop_reason is StopReason.ERROR and result.error is not None:
            raise result.error
        last = result.last_message
        if last is None:
            raise UserError(f"{self.name}: the group chat had no messages to reply with")
        return last.model_copy(update={"sender": self.name, "usage": result.usage})


def _opening(
    sender: Agent, message: str | Message | None, history: Sequence[Message]
) -> list[Message]:
    opening = list(history)
    if isinstance(message, str):
        opening.append(TextMessage(role="user", content=message, sender=sender.name))
    elif message is not None:
        opening.append(
            message if message.sender else message.model_copy(update={"sender": sender.name})
        )
    return opening


def send(
    sender: Agent,
    receiver: Agent,
    message: str | Message | None = None,
    *,
    history: Sequence[Message] = (),
    max_round: int = 10,
) -> ChatStream:
    """``sender`` says ``message`` to ``receiver``; they then alternate (a 2-member round
    robin) and each new message is yielded. If ``receiver`` is a :class:`GroupChatManager`,
    its chat is used instead. ``max_round`` counts agent replies."""
    opening = _opening(sender, message, history)
    if isinstance(receiver, GroupChatManager):
        return receiver.chat.send(opening, max_round)
    return GroupChat([sender, receiver]).send(opening, max_round)


async def initiate_chat(
    sender: Agent,
    receiver: Agent,
    message: str | Message | None = None,
    *,
    history: Sequence[Message] = (),
    max_round: int = 10,
) -> ChatResult:
    """Run :func:`send` to the end; ``result.messages`` is the opening message plus every
    reply."""
    stream = send(sender, receiver, message, history=history, max_round=max_round)
    async for _ in stream:
        pass
    return stream.result
