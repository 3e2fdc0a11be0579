"""Human input: ``UserProxyAgent`` and the middleware that asks a person for the reply.

Modes (AutoGen.NET's ``HumanInputMode``):

* ``ALWAYS`` — print the prompt and read the reply; ``exit`` ends the chat (terminate
  message); an empty line (or end of input) is an empty reply.
* ``NEVER`` — never ask; the inner agent (a model, or the default reply) answers.
* ``AUTO`` — the inner agent answers until the conversation is terminated (by default: the
  last message is a terminate message); then the person is asked as in ``ALWAYS``.

Input and output functions are injectable, sync or async, so a service can answer instead of
a console. The default input reads a line of standard input in a daemon thread, so that a
cancelled question (a time budget, Ctrl-C) returns at once and never keeps the process alive.

``UserProxyAgent`` and ``AssistantAgent`` are the same agent with different defaults: a user
proxy asks the person ``ALWAYS``, an assistant ``NEVER``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import enum
import inspect
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import ClassVar, TextIO, TypeVar

from ._agent import (
    Agent,
    BaseAgent,
    DefaultReplyAgent,
    GenerateReplyOptions,
    MiddlewareAgent,
)
from ._messages import Message, TextMessage, terminate_message
from ._stop_policy import is_terminate

HUMAN_INPUT_PROMPT = "Please give feedback: Press enter or type 'exit' to stop the conversation."
EXIT_KEYWORD = "exit"
DEFAULT_REPLY = "Default reply is not set. Please pass a default reply to assistant agent"
"""What the agent answers when nobody else does and no ``default_reply`` was given
(AutoGen.NET's wording)."""

InputFunction = Callable[[], str | None] | Callable[[], Awaitable[str | None]]
OutputFunction = Callable[[str], object] | Callable[[str], Awaitable[object]]
TerminationTest = Callable[[Sequence[Message]], bool | Awaitable[bool]]


class HumanInputMode(enum.Enum):
    ALWAYS = "always"
    NEVER = "never"
    AUTO = "auto"


def _read_console_line() -> str | None:
    """One line of standard input without its line ending; ``None`` at the end of input."""
    stdin = sys.stdin
    if stdin is None:
        return None
    descriptor = _descriptor(stdin)
    if descriptor is None or (stdin.isatty() and sys.stdout is not None and sys.stdout.isatty()):
        # A terminal (input() edits the line and reads without sys.stdin's buffer), or a
        # replaced stdin without a file descriptor.
        try:
            return input()
        except EOFError:
            return None
    # Otherwise read the descriptor itself, one byte at a time (never reading ahead): going
    # through sys.stdin would hold its buffer's lock while blocked, and a daemon thread holding
    # that lock makes the interpreter abort at exit.
    line = bytearray()
    while (byte := os.read(descriptor, 1)) and byte != b"\n":
        line += byte
    if not byte and not line:
        return None
    encoding = getattr(stdin, "encoding", None) or "utf-8"
    return line.decode(encoding, errors="replace").removesuffix("\r")


def _descriptor(stream: TextIO) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):  # e.g. io.StringIO
        return None


class _ConsoleReader:
    """Reads console lines in a daemon thread, one read at a time.

    Awaiting :meth:`read_line` can be cancelled at once: the thread stays blocked until a line
    comes (it does not keep the process alive), and that line answers the next question.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: concurrent.futures.Future[str | None] | None = None

    async def read_line(self) -> str | None:
        with self._lock:
            if self._pending is None:
                self._pending = concurrent.futures.Future()
                threading.Thread(
                    target=_fill, args=(self._pending,), name="sandcrew-console-input", daemon=True
                ).start()
            pending = self._pending
        await _wait_until_done(pending)
        with self._lock:
            if self._pending is pending:
                self._pending = None
        return pending.result()


def _fill(line: concurrent.futures.Future[str | None]) -> None:
    try:
        line.set_result(_read_console_line())
    except BaseException as error:
        line.set_exception(error)


_T = TypeVar("_T")


async def _wait_until_done(source: concurrent.futures.Future[_T]) -> None:
    """Wait until a thread's future is done; cancelling the wait leaves ``source`` untouched."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def wake(_: concurrent.futures.Future[_T]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop may be closed by then
            loop.call_soon_threadsafe(_set_done, done)

    source.add_done_callback(wake)
    await done


def _set_done(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


_console = _ConsoleReader()


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
            answer = await _console.read_line()
        else:
            answer = await _maybe_await(self.input_fn())
        if answer is not None and answer.strip() == self.exit_keyword:
            return terminate_message(sender)
        return TextMessage(content=answer or "", sender=sender)


class UserProxyAgent(MiddlewareAgent):
    """An agent that stands for a person (AutoGen.NET's ``UserProxyAgent``); it asks the
    person ``ALWAYS`` unless ``human_input_mode`` says otherwise.

    ``inner`` answers when the person is not asked (``NEVER``, or ``AUTO`` before the end);
    without one, a :class:`DefaultReplyAgent` answers ``default_reply``.
    """

    default_human_input_mode: ClassVar[HumanInputMode] = HumanInputMode.ALWAYS

    def __init__(
        self,
        name: str,
        *,
        human_input_mode: HumanInputMode | None = None,
        inner: Agent | None = None,
        default_reply: str = DEFAULT_REPLY,
        description: str | None = None,
        input_fn: InputFunction | None = None,
        output_fn: OutputFunction | None = None,
        is_termination: TerminationTest | None = None,
        prompt: str = HUMAN_INPUT_PROMPT,
        exit_keyword: str = EXIT_KEYWORD,
    ) -> None:
        if human_input_mode is None:
            human_input_mode = self.default_human_input_mode
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


class AssistantAgent(UserProxyAgent):
    """The same agent as :class:`UserProxyAgent`, but it asks the person ``NEVER`` by
    default: ``inner`` (a model) or the ``default_reply`` answers (AutoGen.NET's
    ``AssistantAgent``)."""

    default_human_input_mode: ClassVar[HumanInputMode] = HumanInputMode.NEVER


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
