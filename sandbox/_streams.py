"""The attached container stream: deliver the program, split stdout from stderr, cap both.

Docker multiplexes a non-TTY attach stream in frames: an 8-byte header (stream
kind, three zero bytes, big-endian payload size) followed by the payload. The
parser here is incremental, so memory stays bounded by the caps however much the
program prints: bytes past a cap are read and dropped, which keeps the program
from blocking on a full pipe. The supervisor's marks are taken off the program's
output: its acknowledgement byte (the first byte on stdout) and its exit-status
trailer at the end of each stream.
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ._inside.framing import ARTIFACTS_FRAME

_HEADER_SIZE = 8
_STDOUT = 1
_STDERR = 2
_RECV_SIZE = 64 * 1024
# A status is a few digits and a newline; an artifacts frame's start is "A", its length, a newline.
_STATUS_LIMIT = 24

StreamName = Literal["stdout", "stderr"]


class _Connection(Protocol):
    def recv(self, size: int, /) -> bytes: ...
    def sendall(self, data: bytes, /) -> Any: ...
    def settimeout(self, value: float | None, /) -> Any: ...
    def close(self) -> Any: ...
    def fileno(self) -> int: ...


@dataclass
class CappedBuffer:
    """Keeps the first ``limit`` bytes it is fed; remembers whether more came.

    ``on_kept`` is told each piece as it is kept: live output is exactly the
    bytes the result will hold, and stops at the same cap.
    """

    limit: int
    data: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    on_kept: Callable[[bytes], None] | None = None

    def feed(self, chunk: bytes | memoryview) -> None:
        room = self.limit - len(self.data)
        if room > 0:
            kept = bytes(chunk[:room])
            self.data += kept
            if kept and self.on_kept is not None:
                self.on_kept(kept)
        if len(chunk) > room:
            self.truncated = True

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


@dataclass
class TrailedStream:
    """One stream's bytes up to the supervisor's exit-status trailer, which is kept apart.

    The trailer is ``mark + status + "\\n"``; what could be the start of a mark
    split across chunks is held back until the next chunk tells.
    """

    sink: CappedBuffer
    mark: bytes
    """Empty when no trailer is expected."""
    artifacts: CappedBuffer | None = None
    """Where the supervisor's artifacts frame (``mark + "A<length>\\n" + frame``) goes, if any."""
    status: int | None = None
    timed_out: bool = False
    """The trailer said the run limit ended the program (``T<status>``)."""
    _frame_left: int | None = None
    _pending: bytearray = field(default_factory=bytearray)
    _after_mark: bytearray | None = None
    _ended: bool = False

    def feed(self, chunk: bytes | memoryview) -> None:
        if self._ended or not self.mark:
            self.sink.feed(chunk)
            return
        if self._after_mark is not None:
            self._read_status(chunk)
            return
        self._pending += chunk
        index = self._pending.find(self.mark)
        if index < 0:
            # Only a possible start of the mark is held back (so live output is not
            # delayed): the buffer stays shorter than the mark, and each byte is
            # searched a bounded number of times.
            cut = len(self._pending) - _mark_start_at_end(self._pending, self.mark)
            if cut > 0:
                self.sink.feed(bytes(self._pending[:cut]))
                del self._pending[:cut]
            return
        self.sink.feed(bytes(self._pending[:index]))
        rest = bytes(self._pending[index + len(self.mark) :])
        self._pending = bytearray()
        self._after_mark = bytearray()
        self._read_status(rest)

    def _read_status(self, chunk: bytes | memoryview) -> None:
        """Take the status digits after the mark; at most :data:`_STATUS_LIMIT` bytes are kept."""
        assert self._after_mark is not None
        if self._frame_left is not None:
            self._read_frame(chunk)
            return
        room = _STATUS_LIMIT - len(self._after_mark)
        piece = bytes(chunk[:room])
        end = piece.find(b"\n")
        if end < 0:
            self._after_mark += piece
            if len(self._after_mark) >= _STATUS_LIMIT:
                self._end(None, chunk[room:])  # no status this long: not a trailer of ours
            return
        text = bytes(self._after_mark) + piece[:end]
        rest = chunk[end + 1 :]
        length = text.removeprefix(ARTIFACTS_FRAME)
        if self.artifacts is not None and text.startswith(ARTIFACTS_FRAME) and length.isdigit():
            self._frame_left = int(length)
            self._read_frame(rest)
            return
        timed_out = text.startswith(b"T")
        digits = text.removeprefix(b"T")
        self.timed_out = timed_out and digits.isdigit()
        self._end(int(digits) if digits.isdigit() else None, rest)

    def _read_frame(self, chunk: bytes | memoryview) -> None:
        """Pass the artifacts frame's bytes to its sink; then look for the trailer again."""
        assert self.artifacts is not None
        assert self._frame_left is not None
        taken = chunk[: self._frame_left]
        self.artifacts.feed(taken)
        self._frame_left -= len(taken)
        if self._frame_left == 0:
            self._frame_left = None
            self._after_mark = None
            rest = chunk[len(taken) :]
            if rest:
                self.feed(rest)

    def _end(self, status: int | None, rest: bytes | memoryview) -> None:
        self._after_mark = None
        self._ended = True
        self.status = status
        if rest:
            self.sink.feed(rest)  # nothing follows a real trailer; the sink stays capped

    @property
    def frame_cut(self) -> bool:
        """The stream ended in the middle of the artifacts frame."""
        return self._frame_left is not None

    def finish(self) -> None:
        """The stream ended: what was held back is output after all."""
        if self._pending:
            self.sink.feed(bytes(self._pending))
            self._pending.clear()


def _mark_start_at_end(data: bytearray, mark: bytes) -> int:
    """Length of the longest end of ``data`` that the mark could continue (0 if none)."""
    first = max(0, len(data) - (len(mark) - 1))
    position = data.find(mark[:1], first)
    while position >= 0:
        if mark.startswith(data[position:]):
            return len(data) - position
        position = data.find(mark[:1], position + 1)
    return 0


@dataclass
class Demultiplexer:
    """Incremental parser of Docker's multiplexed stream into two capped buffers.

    With an ``acknowledgement``, the first stdout byte is expected to be it and
    is not passed on; ``acknowledged`` tells whether it came. With a
    ``trailer_mark``, each stream's exit-status trailer is taken off and
    :attr:`exit_status` tells the status once both streams carried it.
    """

    stdout: CappedBuffer
    stderr: CappedBuffer
    acknowledgement: bytes = b""
    trailer_mark: bytes = b""
    artifacts: CappedBuffer | None = None
    """Receives the artifacts frame the supervisor may print on stdout before its trailer."""
    acknowledged: bool = False
    received: bool = False
    """Whether any payload byte, on either stream, arrived."""
    _streams: dict[int, TrailedStream] = field(init=False)
    _header: bytearray = field(default_factory=bytearray)
    _stdout_started: bool = False
    _remaining: int = 0
    _target: TrailedStream | None = None

    def __post_init__(self) -> None:
        self._streams = {
            _STDOUT: TrailedStream(self.stdout, self.trailer_mark, self.artifacts),
            _STDERR: TrailedStream(self.stderr, self.trailer_mark),
        }

    @property
    def exit_status(self) -> int | None:
        """The program's exit status, once both streams have carried it (so all output is in)."""
        out, err = self._streams[_STDOUT].status, self._streams[_STDERR].status
        return out if out is not None and out == err else None

    @property
    def timed_out(self) -> bool:
        """The supervisor reported (on both streams) that the run limit ended the program."""
        out, err = self._streams[_STDOUT], self._streams[_STDERR]
        return self.exit_status is not None and out.timed_out and err.timed_out

    @property
    def artifacts_cut(self) -> bool:
        """The stream ended before the whole artifacts frame came."""
        return self._streams[_STDOUT].frame_cut

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
                self._remaining = int.from_bytes(self._header[4:8], "big")
                self._target = self._streams.get(self._header[0])
                self._header.clear()
                continue
            size = min(self._remaining, end - position)
            self.received = True
            if self._target is self._streams[_STDOUT] and not self._stdout_started:
                # Only the very first stdout byte can be the acknowledgement.
                self._stdout_started = True
                if self.acknowledgement and view[position] == self.acknowledgement[0]:
                    self.acknowledged = True
                    position += 1
                    self._remaining -= 1
                    continue
            if self._target is not None:
                self._target.feed(view[position : position + size])
            position += size
            self._remaining -= size

    def finish(self) -> None:
        """The stream ended: release what was held back."""
        for stream in self._streams.values():
            stream.finish()


def raw_connection(attached: Any) -> _Connection | None:
    """The socket-like object under what ``APIClient.attach_socket`` returns.

    ``None`` once the connection is closed (the wrapper drops its socket).
    """
    connection: _Connection | None = getattr(attached, "_sock", attached)
    return connection


def deliver_and_collect(
    attached: Any,
    payload: bytes,
    *,
    limit: int,
    acknowledgement: bytes,
    trailer_mark: bytes,
    read_for: float,
    on_acknowledged: Callable[[], None] = lambda: None,
    artifact_limit: int = 0,
    on_output: Callable[[StreamName, bytes], None] | None = None,
) -> Demultiplexer:
    """Send ``payload`` to the container's stdin, then read both streams until the end.

    Blocking; meant for a worker thread. The stream ends when the container's
    last process is gone (or the container is killed or removed), or as soon as
    both trailers report the program's exit status. The connection is closed
    afterwards. Reading stops after ``read_for`` seconds whatever comes (the
    caller then asks the engine). ``on_acknowledged`` is called once the
    acknowledgement has come: the program starts then. ``on_output`` is told
    the program's output as it is read (this thread), without the supervisor's marks.
    """
    give_up = time.monotonic() + read_for
    told = False
    connection = raw_connection(attached)
    if connection is None:
        raise ValueError("the attach connection is already closed")
    demultiplexer = Demultiplexer(
        CappedBuffer(limit, on_kept=_telling(on_output, "stdout")),
        CappedBuffer(limit, on_kept=_telling(on_output, "stderr")),
        acknowledgement=acknowledgement,
        trailer_mark=trailer_mark,
        artifacts=CappedBuffer(artifact_limit) if artifact_limit else None,
    )
    try:
        # A program may stay silent for longer than the client's request timeout,
        # but never for longer than the run may last.
        connection.settimeout(read_for)
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
            if demultiplexer.acknowledged and not told:
                told = True
                on_acknowledged()
            if demultiplexer.exit_status is not None:
                break
            remaining = give_up - time.monotonic()
            if remaining <= 0:
                break
            connection.settimeout(remaining)
    finally:
        close_connection(attached)
    demultiplexer.finish()
    return demultiplexer


def _telling(
    on_output: Callable[[StreamName, bytes], None] | None, stream: StreamName
) -> Callable[[bytes], None] | None:
    if on_output is None:
        return None
    return lambda data: on_output(stream, data)


def connection_is_quiet(attached: Any) -> bool:
    """True while nothing, not even the end of the stream, waits to be read.

    A waiting container's supervisor prints nothing before it has its program,
    so anything readable means the container has ended (killed, removed, or
    its stdin closed). Connections without a file descriptor count as quiet.
    """
    connection = raw_connection(attached)
    if connection is None:
        return False
    try:
        descriptor = connection.fileno()
    except (AttributeError, OSError, ValueError):
        return True
    if descriptor < 0:
        return False  # already closed
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(descriptor, select.POLLIN | select.POLLPRI)
        return not poller.poll(0)
    readable, _, _ = select.select([descriptor], [], [], 0)
    return not readable


def shutdown_connection(attached: Any) -> None:
    """End both directions of the connection without closing it.

    Wakes a reader blocked in ``recv`` on another thread (a close does not, and
    would free the descriptor number while the reader still waits on it).
    """
    connection = raw_connection(attached)
    shutdown = getattr(connection, "shutdown", None)
    if shutdown is not None:
        with contextlib.suppress(OSError):
            shutdown(socket.SHUT_RDWR)


def close_connection(attached: Any) -> None:
    """Close the attach connection and the wrapper around it; closing twice is fine."""
    connection = raw_connection(attached)
    if connection is not None:
        connection.close()
    close = getattr(attached, "close", None)
    if close is not None:
        close()
