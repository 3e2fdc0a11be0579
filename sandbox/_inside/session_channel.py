"""The channel between a session's supervisor and the driver of its interpreter.

The driver (a program of the session's uid, so as untrusted as the code it runs)
reads cells on :data:`COMMANDS_FD` and writes messages on :data:`MESSAGES_FD`,
both ends of unix socket pairs the supervisor made (a socket, unlike a pipe,
cannot be opened again through ``/proc/PID/fd`` by another process); its stdout
and stderr are plain pipes the supervisor reads apart. A command is a 4-byte
big-endian length and a JSON object (``{"seq": n, "code": "...",
"display_limit": n}``); a message is a kind byte, a 4-byte length and a JSON
object:

- :data:`READY` once the interpreter can take a cell (``{"count": n}``);
- :data:`DISPLAY` for each display output of the running cell
  (``{"kind": "display" | "result", "data": {mime: text}, "binary": [mime, ...]}``,
  the binary types' data base64-encoded); ``{"kind": ..., "dropped": size}`` for
  one the driver did not send because it is larger than ``display_limit``;
- :data:`RESULT` when a cell has ended (``{"seq": n, "count": n, "error": null |
  {"name", "value", "traceback"}}``).

The code in the interpreter can write on these descriptors too: what it says
there is the interpreter's word, like its output. The supervisor reads it with
bounded memory (a display message over the limit is read and dropped, anything
else malformed is a broken channel) and passes on only the fields above, as
flat strings and numbers of bounded size (:func:`clean_display`,
:func:`clean_result`). Everything the supervisor decides itself (timeout, kill,
state loss, expiry) never comes from here.
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
DROPPED_DISPLAY = b"-"
"""Not on the wire: what :class:`MessageReader` gives for a display message over its limit."""

ERROR_TEXT_LIMIT = 64 * 1024
"""Characters of an error's name, value or traceback that are passed on; the rest is cut."""

_LENGTH_SIZE = 4
_HEADER_SIZE = 1 + _LENGTH_SIZE


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
    send_encoded(encode_message(kind, payload), fd)


def send_encoded(message: bytes, fd: int = MESSAGES_FD) -> None:
    """Send a message :func:`encode_message` made, blocking."""
    os.set_blocking(fd, True)
    write_all(fd, message)


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
    """Incremental parser of the driver's messages; memory bounded by ``limit`` per message.

    A display message over the limit is read and dropped as it comes (the cell
    loses that output, not its interpreter): :meth:`feed` gives
    ``(DROPPED_DISPLAY, {"size": n})`` for it. Any other message over the limit,
    an unknown kind, or a body that is not a JSON object (nested too deeply to
    parse included) is a :class:`ChannelError`.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._pending = bytearray()
        self._dropping = 0
        """Bytes of an oversized display message still to read and drop."""

    def feed(self, chunk: bytes) -> list[tuple[bytes, dict[str, Any]]]:
        """The whole messages ``chunk`` completes; :class:`ChannelError` on a broken format."""
        if self._dropping:
            dropped = min(self._dropping, len(chunk))
            self._dropping -= dropped
            chunk = chunk[dropped:]
        self._pending += chunk
        messages: list[tuple[bytes, dict[str, Any]]] = []
        while len(self._pending) >= _HEADER_SIZE:
            kind = bytes(self._pending[:1])
            if kind not in MESSAGE_KINDS:
                raise ChannelError(f"unknown message kind {kind!r}")
            size = int.from_bytes(self._pending[1:_HEADER_SIZE], "big")
            if size > self._limit:
                if kind != DISPLAY:
                    raise ChannelError(f"a message of {size} bytes (at most {self._limit})")
                messages.append((DROPPED_DISPLAY, {"size": size}))
                held = len(self._pending) - _HEADER_SIZE
                self._dropping = max(size - held, 0)
                del self._pending[: _HEADER_SIZE + min(size, held)]
                if self._dropping:
                    break
                continue
            if len(self._pending) < _HEADER_SIZE + size:
                break
            body = bytes(self._pending[_HEADER_SIZE : _HEADER_SIZE + size])
            del self._pending[: _HEADER_SIZE + size]
            messages.append((kind, _json_object(body)))
        return messages


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        # RecursionError: thousands of nested brackets, well under the size limit.
        raise ChannelError("a message that is not JSON (or nested too deeply)") from None
    if not isinstance(payload, dict):
        raise ChannelError("a message that is not a JSON object")
    return payload


def clean_count(value: Any) -> int | None:
    """An execution count as the interpreter said it, if it is a number."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def clean_display(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The display message's MIME bundle as flat strings, or ``None`` if it holds none."""
    data = payload.get("data")
    if not isinstance(data, dict):
        return None
    bundle = {mime: value for mime, value in data.items() if isinstance(value, str)}
    binary = payload.get("binary")
    binary_types = (
        [mime for mime in binary if isinstance(mime, str) and mime in bundle]
        if isinstance(binary, list)
        else []
    )
    kind = "result" if payload.get("kind") == "result" else "display"
    return {"kind": kind, "data": bundle, "binary": binary_types}


def clean_result(payload: dict[str, Any]) -> dict[str, Any]:
    """A result message's count and error as the host may read them (bounded strings)."""
    return {"count": clean_count(payload.get("count")), "error": clean_error(payload.get("error"))}


def clean_error(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        return {"name": "Error", "value": _text(value), "traceback": ""}
    return {
        "name": _text(value.get("name")) or "Error",
        "value": _text(value.get("value")),
        "traceback": _text(value.get("traceback")),
    }


def _text(value: Any) -> str:
    if not isinstance(value, str):
        return ""
    if len(value) > ERROR_TEXT_LIMIT:
        return value[:ERROR_TEXT_LIMIT] + f"\n[{len(value) - ERROR_TEXT_LIMIT} characters cut]"
    return value
