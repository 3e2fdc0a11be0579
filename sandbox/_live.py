"""Live output: a program's output handed to the caller while it runs.

The reading thread (:mod:`._streams`) tells each piece of output as it is kept
by the capped buffers, so the live output is exactly what the result will hold
and stops at the same cap: a flood costs the caller no more than the result does.
Pieces are carried to the caller's event loop, joined while the caller is busy
(one wake-up per batch, however small the program's writes), decoded as UTF-8
without splitting a character, and handed to the callback in the order they
were read.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ._result import ExecutionResult
from ._session_models import OutputEvent
from ._streams import StreamName

_T = TypeVar("_T")


OutputCallback = Callable[[OutputEvent], Awaitable[None] | None]
"""Called with each :class:`OutputEvent`, in order, on the caller's event loop; may be async."""


async def tell_at_end(callback: OutputCallback | None, result: ExecutionResult) -> ExecutionResult:
    """For a sandbox that sees a program's output only once it ended: hand it over then.

    stdout first, then stderr, each as one :class:`OutputEvent` (none for an empty
    stream), before the result is returned.
    """
    if callback is not None:
        streams: tuple[tuple[StreamName, str], ...] = (
            ("stdout", result.stdout),
            ("stderr", result.stderr),
        )
        for stream, text in streams:
            if text:
                told = callback(OutputEvent(stream=stream, text=text))
                if inspect.isawaitable(told):
                    await told
    return result


class LiveOutput:
    """Carries output from the reading thread to ``callback`` on ``loop``."""

    def __init__(self, callback: OutputCallback, loop: asyncio.AbstractEventLoop) -> None:
        self._callback = callback
        self._loop = loop
        self._lock = threading.Lock()
        self._pending: list[tuple[StreamName, bytearray]] = []
        self._woken = False
        self._wake = asyncio.Event()
        self._finished = False
        self._decoders: dict[StreamName, codecs.IncrementalDecoder] = {
            "stdout": codecs.getincrementaldecoder("utf-8")(errors="replace"),
            "stderr": codecs.getincrementaldecoder("utf-8")(errors="replace"),
        }

    def receive(self, stream: StreamName, data: bytes) -> None:
        """Take a piece of output; called on the reading thread."""
        with self._lock:
            if self._pending and self._pending[-1][0] == stream:
                self._pending[-1][1].extend(data)
            else:
                self._pending.append((stream, bytearray(data)))
            if self._woken:
                return
            self._woken = True
        # A closed loop: nobody is listening any more.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._wake.set)

    async def _deliver(self) -> None:
        """Hand the pieces to the callback until :meth:`_finish` and everything is told."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            with self._lock:
                batch, self._pending = self._pending, []
                self._woken = False
                finished = self._finished
            for stream, data in batch:
                await self._tell(stream, self._decoders[stream].decode(bytes(data)))
            if finished:
                for stream, decoder in self._decoders.items():
                    await self._tell(stream, decoder.decode(b"", final=True))
                return

    def _finish(self) -> None:
        with self._lock:
            self._finished = True
        self._wake.set()

    async def _tell(self, stream: StreamName, text: str) -> None:
        if not text:
            return
        told = self._callback(OutputEvent(stream=stream, text=text))
        if inspect.isawaitable(told):
            await told

    async def around(self, work: Awaitable[_T]) -> _T:
        """Await ``work`` while handing its output to the callback; all of it is told first.

        If the callback raises, ``work`` is cancelled and the callback's error raised.
        """
        working = asyncio.ensure_future(work)
        delivering = asyncio.ensure_future(self._deliver())
        try:
            await asyncio.wait({working, delivering}, return_when=asyncio.FIRST_COMPLETED)
            if delivering.done():  # only a failing callback ends the delivery early
                working.cancel()
                await asyncio.wait({working})
                delivering.result()
            result = await working
            self._finish()
            await delivering
            return result
        except BaseException:
            for task in (working, delivering):
                task.cancel()
            await asyncio.wait({working, delivering})
            raise
