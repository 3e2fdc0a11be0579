"""The session's wire protocol between the host and the session supervisor, both ends of it.

The host writes **requests** on the container's stdin; the supervisor writes
**frames** on the container's stdout, which nothing else in the container can
write (see :mod:`.session`). Both are encoded and parsed here, so the two ends
cannot disagree, and both parsers are pure (tested on the host with hostile
input: a wrong nonce, an unknown kind, oversized, torn or deeply nested
messages).

A request is a header line ``KIND IDENT META_SIZE DATA_SIZE\\n``, then
``META_SIZE`` bytes of a JSON object, then ``DATA_SIZE`` raw bytes (a cell's
code, a file's content). The first line the host sends is the session's nonce.

A frame is ``FRAME_START NONCE " " KIND " " SIZE "\\n"`` and ``SIZE`` bytes of
payload. The nonce is random per session and lives only in the host and the
supervisor, so nothing a program prints can pass for a frame.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

FRAME_START = b"\x1e"  # ASCII record separator

# -- requests (host -> supervisor) ------------------------------------------------------

RUN = "run"
"""Run a cell: meta ``{"limit_ms", "context"}``, data the code; IDENT is the cell's number."""
INTERRUPT = "interrupt"
"""SIGINT to the running cell; past the grace period, the interpreter is replaced."""
RESTART = "restart"
"""A fresh interpreter now (a running cell ends with ``state_lost``)."""
DROP_CONTEXT = "drop_context"
"""Forget a context's namespace: meta ``{"context"}`` (the next cell there starts afresh)."""
FILE = "file"
"""A file request: meta ``{"op", "path", ...}`` (see :data:`FILE_OPERATIONS`), data for ``put``."""
COMMAND = "command"
"""Start a command beside the interpreter: meta ``{"command", "env", "cwd", "limit_ms"}``."""
SIGNAL = "signal"
"""Send a signal to a command's processes: meta ``{"signal"}``; IDENT is the command's."""
REQUEST_KINDS = frozenset({RUN, INTERRUPT, RESTART, DROP_CONTEXT, FILE, COMMAND, SIGNAL})

FILE_OPERATIONS = frozenset({"put", "get", "list", "stat", "remove", "rename", "mkdir"})
"""What a file request may ask: ``put`` (data; parents made), ``get`` (``max_bytes``), ``list``,
``stat``, ``remove`` (a file, or a folder with what it holds), ``rename`` (``target``),
``mkdir`` (parents made)."""

# -- frames (supervisor -> host) --------------------------------------------------------

READY = "ready"
"""The interpreter takes cells: ``{"count"}``."""
OUT = "out"
"""What the running cell printed on stdout, raw bytes as they came (capped per cell)."""
ERR = "err"
"""The same for stderr."""
DISPLAY = "display"
"""A display output of the running cell: ``{"kind", "data": {mime: text}, "binary": [mime]}``."""
END = "end"
"""A cell is over: the supervisor's verdict (see :func:`cell_verdict`)."""
LOST = "lost"
"""The interpreter died or was replaced between cells: ``{"reason"}`` (the next cell says so)."""
FILE_ANSWER = "file"
"""The answer to a file request: IDENT, a JSON object and the file's bytes (:func:`file_answer`)."""
COMMAND_OUTPUT = "cmd_output"
"""What a command printed: IDENT, the stream's letter and bytes (:func:`command_output`)."""
COMMAND_END = "cmd_end"
"""A command ended: ``{"id", "exit_code", "signal", "timed_out", "stdout_truncated", ...}``."""
EXPIRED = "expired"
"""The idle timeout or the lifetime ended the session: ``{"reason"}``."""
FAILED = "failed"
"""The interpreter could not start, or the supervisor failed: ``{"reason"}``."""
FRAME_KINDS = frozenset(
    {READY, OUT, ERR, DISPLAY, END, LOST, FILE_ANSWER, COMMAND_OUTPUT, COMMAND_END, EXPIRED, FAILED}
)

REQUEST_HEADER_LIMIT = 256
"""Bytes of a request's header line, at most."""
FRAME_HEADER_LIMIT = 160
"""Bytes of a frame's header, nonce included, at most."""
META_LIMIT = 1024 * 1024
"""Bytes of a request's JSON meta (a command's environment included), at most."""


class ProtocolError(Exception):
    """The other end broke the protocol (a host or supervisor bug, or a forged stream)."""


def json_object(payload: bytes) -> dict[str, Any]:
    """``payload`` as a JSON object; :class:`ProtocolError` for anything else.

    Deeply nested JSON (thousands of brackets, small in bytes) is refused like
    malformed JSON: the parser's recursion would fail on it.
    """
    try:
        value = json.loads(payload)
    except (ValueError, RecursionError):
        raise ProtocolError("a message that is not JSON (or is nested too deeply)") from None
    if not isinstance(value, dict):
        raise ProtocolError("a message that is not a JSON object")
    return value


# -- requests -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    kind: str
    ident: str
    meta: dict[str, Any]
    data: bytes = b""


def encode_request(kind: str, ident: str, meta: dict[str, Any], data: bytes = b"") -> bytes:
    """One request as the host sends it."""
    if kind not in REQUEST_KINDS:
        raise ValueError(f"unknown request kind {kind!r}")
    if not ident or not ident.isalnum():
        raise ValueError(f"a request id is letters and digits (got {ident!r})")
    body = json.dumps(meta).encode()
    return f"{kind} {ident} {len(body)} {len(data)}\n".encode() + body + data


class RequestReader:
    """The supervisor's incremental parser of requests; memory bounded by ``max_data``.

    :meth:`feed` returns the requests a chunk completes and raises
    :class:`ProtocolError` on a broken stream (which ends the session: only the
    host writes here).
    """

    def __init__(self, max_data: int) -> None:
        self._max_data = max_data
        self._pending = bytearray()

    def feed(self, chunk: bytes) -> list[Request]:
        self._pending += chunk
        requests: list[Request] = []
        while True:
            newline = self._pending.find(b"\n", 0, REQUEST_HEADER_LIMIT)
            if newline < 0:
                if len(self._pending) >= REQUEST_HEADER_LIMIT:
                    raise ProtocolError("a request header that does not end")
                return requests
            try:
                header = bytes(self._pending[:newline]).decode()
                kind, ident, meta_text, data_text = header.split(" ")
                meta_size, data_size = int(meta_text), int(data_text)
            except ValueError:
                raise ProtocolError("an unreadable request header") from None
            if kind not in REQUEST_KINDS:
                raise ProtocolError(f"an unknown request kind {kind!r}")
            if not 0 <= meta_size <= META_LIMIT or not 0 <= data_size <= self._max_data:
                raise ProtocolError(f"a request of {meta_size} + {data_size} bytes")
            end = newline + 1 + meta_size + data_size
            if len(self._pending) < end:
                return requests
            meta = json_object(bytes(self._pending[newline + 1 : newline + 1 + meta_size]))
            data = bytes(self._pending[newline + 1 + meta_size : end])
            del self._pending[:end]
            requests.append(Request(kind, ident, meta, data))


# -- frames -------------------------------------------------------------------------------


def encode_frame(nonce: bytes, kind: str, payload: bytes) -> bytes:
    """One frame as the supervisor writes it."""
    return FRAME_START + nonce + f" {kind} {len(payload)}\n".encode() + payload


class FrameReader:
    """The host's incremental parser of the supervisor's frames (the container's stdout).

    Anything on that stream outside a frame, a wrong nonce, an unknown kind or a
    frame larger than ``max_frame`` is a :class:`ProtocolError`: the session can
    no longer be trusted and ends. Memory is bounded by ``max_frame``.
    """

    def __init__(self, nonce: bytes, max_frame: int) -> None:
        self._mark = FRAME_START + nonce + b" "
        self._max_frame = max_frame
        self._pending = bytearray()

    def feed(self, chunk: bytes) -> list[tuple[str, bytes]]:
        self._pending += chunk
        frames: list[tuple[str, bytes]] = []
        mark = self._mark
        while self._pending:
            if not mark.startswith(bytes(self._pending[: len(mark)])):
                raise ProtocolError("output outside the supervisor's frames")
            newline = self._pending.find(b"\n", 0, FRAME_HEADER_LIMIT)
            if newline < 0:
                if len(self._pending) >= FRAME_HEADER_LIMIT:
                    raise ProtocolError("a frame header that does not end")
                break
            if newline < len(mark):
                raise ProtocolError("a frame without the session's nonce")
            try:
                kind, size_text = bytes(self._pending[len(mark) : newline]).decode().split(" ")
                size = int(size_text)
            except ValueError:
                raise ProtocolError("an unreadable frame header") from None
            if kind not in FRAME_KINDS:
                raise ProtocolError(f"an unknown frame kind {kind!r}")
            if not 0 <= size <= self._max_frame:
                raise ProtocolError(f"a frame of {size} bytes (at most {self._max_frame})")
            end = newline + 1 + size
            if len(self._pending) < end:
                break
            frames.append((kind, bytes(self._pending[newline + 1 : end])))
            del self._pending[:end]
        return frames


# -- payloads ----------------------------------------------------------------------------


def cell_verdict(
    seq: int,
    *,
    count: int | None,
    error: dict[str, str] | None,
    timed_out: bool,
    state_lost: bool,
    reason: str | None,
    truncated: dict[str, bool],
) -> bytes:
    """The payload of an :data:`END` frame."""
    return json.dumps(
        {
            "seq": seq,
            "count": count,
            "error": error,
            "timed_out": timed_out,
            "state_lost": state_lost,
            "reason": reason,
            "stdout_truncated": truncated.get("out", False),
            "stderr_truncated": truncated.get("err", False),
            "outputs_truncated": truncated.get("display", False),
        }
    ).encode()


def file_answer(ident: str, answer: dict[str, Any], body: bytes = b"") -> bytes:
    """The payload of a :data:`FILE_ANSWER` frame."""
    return ident.encode() + b"\n" + json.dumps(answer).encode() + b"\n" + body


def read_file_answer(payload: bytes) -> tuple[str, dict[str, Any], bytes]:
    ident, _, rest = payload.partition(b"\n")
    head, _, body = rest.partition(b"\n")
    return ident.decode(errors="replace"), json_object(head), body


def command_output(ident: str, stream: str, data: bytes) -> bytes:
    """The payload of a :data:`COMMAND_OUTPUT` frame (``stream`` is ``out`` or ``err``)."""
    return f"{ident} {stream}\n".encode() + data


def read_command_output(payload: bytes) -> tuple[str, str, bytes]:
    head, _, data = payload.partition(b"\n")
    ident, _, stream = head.decode(errors="replace").partition(" ")
    if stream not in ("out", "err"):
        raise ProtocolError(f"a command's output on an unknown stream {stream!r}")
    return ident, stream, data
