"""The channel between a session's supervisor and the driver of its interpreter.

The driver (a program of the session's uid, so as untrusted as the code it runs)
reads cells on :data:`COMMANDS_FD` and writes messages on :data:`MESSAGES_FD`;
its stdout and stderr are plain pipes the supervisor reads apart. A command is a
4-byte big-endian length and a JSON object (``{"seq": n, "code": "..."}``); a
message is a kind byte, a 4-byte length and a JSON object:

- :data:`READY` once the interpreter can take a cell (``{"count": n}``);
- :data:`DISPLAY` for each display output of the running cell
  (``{"kind": "display" | "result", "data": {mime: text}, "binary": [mime, ...]}``,
  the binary types' data base64-encoded);
- :data:`RESULT` when a cell has ended (``{"seq": n, "count": n, "error": null |
  {"name", "value", "traceback"}}``).

The code in the interpreter can write on these descriptors too: what it says
there is the interpreter's word, like its output. Everything the supervisor
decides itself (timeout, kill, state loss, expiry) never comes from here.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .framing import write_all

COMMANDS_FD = 3
MESSAGES_FD = 4

READY = b"k"
DISPLAY = b"d"
RESULT = b"r"
MESSAGE_KINDS = (READY, DISPLAY, RESULT)

_LENGTH_SIZE = 4


class ChannelError(Exception):
    """The other side broke the channel's format."""


def encode_command(payload: dict[str, Any]) -> bytes:
    body = json.dumps(payload).encode()
    return len(body).to_bytes(_LENGTH_SIZE, "big") + body


def encode_message(kind: bytes, payload: dict[str, Any]) -> bytes:
    body = json.dumps(payload).encode()
    return kind + len(body).to_bytes(_LENGTH_SIZE, "big") + body


def send_message(kind: bytes, payload: dict[str, Any], fd: int = MESSAGES_FD) -> None:
    """Send one message, blocking (the cell's code may have made the descriptor non-blocking)."""
    data = encode_message(kind, payload)
    os.set_blocking(fd, True)
    write_all(fd, data)


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks: list[bytes] = []
    left = size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive_command(fd: int = COMMANDS_FD) -> dict[str, Any] | None:
    """The next command, or ``None`` once the supervisor closed the channel."""
    os.set_blocking(fd, True)
    head = _read_exactly(fd, _LENGTH_SIZE)
    if head is None:
        return None
    body = _read_exactly(fd, int.from_bytes(head, "big"))
    if body is None:
        return None
    command: dict[str, Any] = json.loads(body)
    return command


class MessageReader:
    """Incremental parser of the driver's messages; memory bounded by ``limit`` per message."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._pending = bytearray()

    def feed(self, chunk: bytes) -> list[tuple[bytes, dict[str, Any]]]:
        """The whole messages ``chunk`` completes; :class:`ChannelError` on a broken format."""
        self._pending += chunk
        messages: list[tuple[bytes, dict[str, Any]]] = []
        header = 1 + _LENGTH_SIZE
        while len(self._pending) >= header:
            kind = bytes(self._pending[:1])
            if kind not in MESSAGE_KINDS:
                raise ChannelError(f"unknown message kind {kind!r}")
            size = int.from_bytes(self._pending[1:header], "big")
            if size > self._limit:
                raise ChannelError(f"a message of {size} bytes (at most {self._limit})")
            if len(self._pending) < header + size:
                break
            body = bytes(self._pending[header : header + size])
            del self._pending[: header + size]
            try:
                payload = json.loads(body)
            except ValueError:
                raise ChannelError("a message that is not JSON") from None
            if not isinstance(payload, dict):
                raise ChannelError("a message that is not a JSON object")
            messages.append((kind, payload))
        return messages
