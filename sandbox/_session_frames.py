"""Reading a session container's attach stream: Docker's frames, then the supervisor's.

Docker multiplexes the attach stream (an 8-byte header: stream kind, three zero
bytes, big-endian size). The container's stdout carries only the session
supervisor's frames (see :mod:`._inside.session`): ``"\\x1e" NONCE " " KIND " "
SIZE "\\n" PAYLOAD``. Anything else there, a wrong nonce, an unknown kind or a
frame larger than allowed is a :class:`FrameError`: the session cannot be
trusted any more and ends. The container's stderr (the supervisor's own
diagnostics) is kept as a short tail. Memory is bounded by the largest frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FRAME_KINDS = frozenset(
    {"ready", "out", "err", "display", "end", "lost", "file", "expired", "failed"}
)
_DOCKER_HEADER = 8
_FRAME_HEADER_LIMIT = 160
_STDERR_TAIL = 16 * 1024


class FrameError(Exception):
    """The container's stdout broke the supervisor's framing."""


@dataclass
class SessionFrames:
    """Incremental parser; :meth:`feed` returns the ``(kind, payload)`` frames a chunk completes."""

    nonce: bytes
    max_frame: int
    stderr_tail: bytearray = field(default_factory=bytearray)
    _docker_header: bytearray = field(default_factory=bytearray)
    _docker_left: int = 0
    _docker_stream: int = 0
    _stdout: bytearray = field(default_factory=bytearray)

    def feed(self, chunk: bytes) -> list[tuple[str, bytes]]:
        frames: list[tuple[str, bytes]] = []
        view = memoryview(chunk)
        position = 0
        while position < len(view):
            if self._docker_left == 0:
                taken = view[position : position + _DOCKER_HEADER - len(self._docker_header)]
                self._docker_header += taken
                position += len(taken)
                if len(self._docker_header) == _DOCKER_HEADER:
                    self._docker_stream = self._docker_header[0]
                    self._docker_left = int.from_bytes(self._docker_header[4:8], "big")
                    self._docker_header.clear()
                continue
            size = min(self._docker_left, len(view) - position)
            payload = view[position : position + size]
            position += size
            self._docker_left -= size
            if self._docker_stream == 1:
                self._stdout += payload
                frames.extend(self._frames())
            elif self._docker_stream == 2:
                self.stderr_tail += payload
                del self.stderr_tail[:-_STDERR_TAIL]
        return frames

    def _frames(self) -> list[tuple[str, bytes]]:
        frames: list[tuple[str, bytes]] = []
        mark = b"\x1e" + self.nonce + b" "
        while self._stdout:
            if not mark.startswith(bytes(self._stdout[: len(mark)])):
                raise FrameError("output outside the supervisor's frames")
            newline = self._stdout.find(b"\n", 0, _FRAME_HEADER_LIMIT)
            if newline < 0:
                if len(self._stdout) >= _FRAME_HEADER_LIMIT:
                    raise FrameError("a frame header that does not end")
                break
            if newline < len(mark):
                raise FrameError("a frame without the session's nonce")
            try:
                kind, size_text = bytes(self._stdout[len(mark) : newline]).decode().split(" ")
                size = int(size_text)
            except ValueError:
                raise FrameError("an unreadable frame header") from None
            if kind not in FRAME_KINDS:
                raise FrameError(f"an unknown frame kind {kind!r}")
            if not 0 <= size <= self.max_frame:
                raise FrameError(f"a frame of {size} bytes (at most {self.max_frame})")
            end = newline + 1 + size
            if len(self._stdout) < end:
                break
            frames.append((kind, bytes(self._stdout[newline + 1 : end])))
            del self._stdout[:end]
        return frames
