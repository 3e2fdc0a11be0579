"""The stdio client's lines, read on the event loop so that a stop never waits for the client.

The SDK reads stdin in a worker thread, and a thread blocked in ``read()`` cannot be
interrupted: SIGTERM (or Ctrl-C) would stop the server only once its client wrote another
line or closed stdin, and the process would not exit before. Here each read waits on the
event loop until the descriptor is readable, so cancelling the wait ends it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import AsyncIterator, Iterator

_CHUNK = 64 * 1024


class ClientLines:
    """Iterates over the lines read from ``fd`` (each with its newline; the last may lack it).

    Only ``async for`` is offered: that is all the SDK's stdio transport asks of its stdin.
    Each line is decoded as UTF-8, an invalid byte replaced, as the SDK's own reader does.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        line = bytearray()
        while chunk := await _read_when_ready(self._fd):
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                line += chunk[start : end + 1]
                yield line.decode("utf-8", errors="replace")
                line = bytearray()
                start = end + 1
            line += chunk[start:]
        if line:
            yield line.decode("utf-8", errors="replace")


@contextlib.contextmanager
def stdin_lines() -> Iterator[ClientLines]:
    """The client's lines on standard input, which meanwhile reads as empty to anyone else.

    Descriptor 0 points at the null device while this lasts (the lines come from a private
    copy), as the SDK's own transport arranges: whatever else reads it, in this process or
    in a child, can neither take the client's bytes nor leave the loop blocked in a read
    that a stop cannot end.
    """
    private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield ClientLines(private)
    finally:
        os.dup2(private, 0)
        os.close(private)


async def _read_when_ready(fd: int) -> bytes:
    """What ``fd`` has (at most :data:`_CHUNK` bytes; empty at its end), once it has any."""
    while True:
        if not await _wait_until_readable(fd):
            await asyncio.sleep(0)  # the loop still turns between two reads of a file
            return os.read(fd, _CHUNK)
        # Readable, so this returns at once. O_NONBLOCK is not set here (it belongs to the
        # pipe or terminal, which the client or the shell shares), but another process may
        # have set it: then a wake-up with nothing left to read waits again.
        with contextlib.suppress(BlockingIOError):
            return os.read(fd, _CHUNK)


async def _wait_until_readable(fd: int) -> bool:
    """Wait until ``fd`` is readable; False at once for a regular file (``sandcrew mcp <
    requests.jsonl``), which the loop cannot wait for and whose reads never block."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not ready.done():  # told again before the waiting read resumes
            ready.set_result(None)

    try:
        loop.add_reader(fd, readable)
    except PermissionError:
        return False
    try:
        await ready
    finally:
        loop.remove_reader(fd)
    return True
