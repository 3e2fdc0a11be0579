"""The attached container stream: deliver the program, split stdout from stderr, cap both.

Docker multiplexes a non-TTY attach stream in frames: an 8-byte header (stream
kind, three zero bytes, big-endian payload size) followed by the payload. The
parser here is incremental, so memory stays bounded by the caps however much the
program prints: bytes past a cap are read and dropped, which keeps the program
from blocking on a full pipe.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Protocol

_HEADER_SIZE = 8
_STDOUT = 1
_STDERR = 2
_RECV_SIZE = 64 * 1024


class _Connection(Protocol):
    def recv(self, size: int, /) -> bytes: ...
    def sendall(self, data: bytes, /) -> Any: ...
    def settimeout(self, value: float | None, /) -> Any: ...
    def close(self) -> Any: ...


@dataclass
class CappedBuffer:
    """Keeps the first ``limit`` bytes it is fed; remembers whether more came."""

    limit: int
    data: bytearray = field(default_factory=bytearray)
    truncated: bool = False

    def feed(self, chunk: memoryview) -> None:
        room = self.limit - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        if len(chunk) > room:
            self.truncated = True

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


@dataclass
class Demultiplexer:
    """Incremental parser of Docker's multiplexed stream into two capped buffers."""

    stdout: CappedBuffer
    stderr: CappedBuffer
    _header: bytearray = field(default_factory=bytearray)
    _remaining: int = 0
    _target: CappedBuffer | None = None

    def feed(self, chunk: bytes) -> None:
        view = memoryview(chunk)
        position = 0
        end = len(view)
        while position < end:
            if self._remaining == 0:
                taken = view[position : position + _HEADER_SIZE - len(self._header)]
                self._header += taken
                position += len(taken)
                if len(self._header) < _HEADER_SIZE:
                    return
                kind = self._header[0]
                self._remaining = int.from_bytes(self._header[4:8], "big")
                self._header.clear()
                self._target = (
                    self.stdout if kind == _STDOUT else self.stderr if kind == _STDERR else None
                )
                continue
            size = min(self._remaining, end - position)
            if self._target is not None:
                self._target.feed(view[position : position + size])
            position += size
            self._remaining -= size


def raw_connection(attached: Any) -> _Connection:
    """The socket-like object under what ``APIClient.attach_socket`` returns."""
    connection: _Connection = getattr(attached, "_sock", attached)
    return connection


def deliver_and_collect(
    attached: Any, payload: bytes, *, limit: int
) -> tuple[CappedBuffer, CappedBuffer]:
    """Send ``payload`` to the container's stdin, then read both streams until the end.

    Blocking; meant for a worker thread. The stream ends when the container's
    last process is gone (or the container is killed or removed).
    """
    connection = raw_connection(attached)
    stdout, stderr = CappedBuffer(limit), CappedBuffer(limit)
    demultiplexer = Demultiplexer(stdout, stderr)
    try:
        # A program may stay silent for longer than the client's request timeout.
        connection.settimeout(None)
        # If the container died before reading its program (killed at the
        # deadline or removed), whatever it printed is still read below.
        with contextlib.suppress(OSError):
            connection.sendall(payload)
        while True:
            try:
                chunk = connection.recv(_RECV_SIZE)
            except OSError:
                break
            if not chunk:
                break
            demultiplexer.feed(chunk)
    finally:
        close_connection(attached)
    return stdout, stderr


def close_connection(attached: Any) -> None:
    """Close the attach connection and the wrapper around it."""
    raw_connection(attached).close()
    close = getattr(attached, "close", None)
    if close is not None:
        close()
