"""Human input: ``UserProxyAgent`` and the middleware that asks a person for the reply.

Modes (AutoGen.NET's ``HumanInputMode``):

* ``ALWAYS`` — print the prompt and read the reply; ``exit`` ends the chat (terminate
  message); an empty line (or end of input) is an empty reply.
* ``NEVER`` — never ask; the inner agent (a model, or the default reply) answers.
* ``AUTO`` — the inner agent answers until the conversation is terminated (by default: the
  last message is a terminate message); then the person is asked as in ``ALWAYS``.

Input and output functions are injectable, sync or async, so a service can answer instead of
a console. The default input reads stdin in a worker thread.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from sandcrew.agents._agent import (
    Agent,
    BaseAgent,
    DefaultReplyAgent,
    GenerateReplyOptions,
    MiddlewareAgent,
)
from sandcrew.agents._messages import Message, TextMessage, is_terminate, terminate_message

HUMAN_INPUT_PROMPT = "Please give feedback: Press enter or type 'exit' to stop the conversation."
EXIT_KEYWORD = "exit"

InputFunction = Callable[[], str | None] | Callable[[], Awaitable[str | None]]
OutputFunction = Callable[[str], object] | Callable[[str], Awaitable[object]]
TerminationTest = Callable[[Sequence[Message]], bool | Awaitable[bool]]


class HumanInputMode(enum.Enum):
    ALWAYS = "always"
    NEVER = "never"
    AUTO = "auto"


def _read_console() -> str | None:
    try:
        return input()
    except EOFError:
        return None


_T = TypeVar("_T")


async def _maybe_await(value: _T | Awaitable[_T]) -> _T:
    if inspect.isawaitable(value):
        return await value
    return value


def default_is_termination(messages: Sequence[Message]) -> bool:
    """The conversation is over when its last message is a terminate message."""
    return bool(messages) and is_terminate(messages[-1])


class HumanInputMiddleware:
    """Asks a person for the reply according to ``mode`` (see the module docstring)."""

    name = "human_input"

    def __init__(
        self,
        mode: HumanInputMode = HumanInputMode.ALWAYS,
        *,
        input_fn: InputFunction | None = None,
        output_fn: OutputFunction | None = None,
        is_termination: TerminationTest | None = None,
        prompt: str = HUMAN_INPUT_PROMPT,
        exit_keyword: str = EXIT_KEYWORD,
    ) -> None:
        self.mode = mode
        self.input_fn = input_fn
        self.output_fn: OutputFunction = output_fn if output_fn is not None else print
        self.is_termination = is_termination or default_is_termination
        self.prompt = prompt
        self.exit_keyword = exit_keyword

    async def __call__(
        self, messages: Sequence[Message], options: GenerateReplyOptions, agent: Agent
    ) -> Message:
        if self.mode is HumanInputMode.NEVER:
            return await agent.generate_reply(messages, options)
        if self.mode is HumanInputMode.AUTO and not await _maybe_await(
            self.is_termination(messages)
        ):
            return await agent.generate_reply(messages, options)
        return await self.ask(agent.name)

    async def ask(self, sender: str) -> Message:
        """Print the prompt, read one answer and turn it into a reply from ``sender``."""
        await _maybe_await(self.output_fn(self.prompt))
        if self.input_fn is None:
            answer = await asyncio.to_thread(_read_console)
        else:
            answer = await _maybe_await(self.input_fn())
        if answer is not None and answer.strip() == self.exit_keyword:
            return terminate_message(sender)
        return TextMessage(content=answer or "", sender=sender)


class UserProxyAgent(MiddlewareAgent):
    """An agent that stands for a person (AutoGen.NET's ``UserProxyAgent``).

    ``inner`` answers when the person is not asked (``NEVER``, or ``AUTO`` before the end);
    without one, a :class:`DefaultReplyAgent` answers ``default_reply``.
    """

    def __init__(
        self,
        name: str,
        *,
        human_input_mode: HumanInputMode = HumanInputMode.ALWAYS,
        inner: Agent | None = None,
        default_reply: str = "Default reply is not set. Please pass a default reply.",
        description: str | None = None,
        input_fn: InputFunction | None = None,
        output_fn: OutputFunction | None = None,
        is_termination: TerminationTest | None = None,
        prompt: str = HUMAN_INPUT_PROMPT,
        exit_keyword: str = EXIT_KEYWORD,
    ) -> None:
        self.human_input = HumanInputMiddleware(
            human_input_mode,
            input_fn=input_fn,
            output_fn=output_fn,
            is_termination=is_termination,
            prompt=prompt,
            exit_keyword=exit_keyword,
        )
        base: Agent = inner if inner is not None else DefaultReplyAgent(name, default_reply)
        if base.name != name:
            base = _Renamed(base, name)
        super().__init__(base, [self.human_input])
        self._description = description

    @property
    def human_input_mode(self) -> HumanInputMode:
        return self.human_input.mode


class _Renamed(BaseAgent):
    """Lets an inner agent answer under the proxy's name."""

    def __init__(self, inner: Agent, name: str) -> None:
        super().__init__(name)
        self._inner = inner

    async def generate_reply(
        self, messages: Sequence[Message], options: GenerateReplyOptions | None = None
    ) -> Message:
        reply = await self._inner.generate_reply(messages, options)
        return reply.model_copy(update={"sender": self.name})
