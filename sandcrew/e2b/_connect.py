"""The Connect protocol, as envd speaks it to the E2B SDK: JSON codec, unary and server streams.

A unary call is a plain POST: a JSON body in, a JSON body out (``application/json``);
an error is an HTTP status with ``{"code": ..., "message": ...}``. A server-streaming
call (``application/connect+json``) sends its request and each answer in an envelope:
one flags byte, four bytes of big-endian length, the message; the last envelope has
flag ``0x02`` and holds ``{}`` or ``{"error": {...}}``. Pure functions, tested byte by
byte (tests/e2b_server/test_wire.py).
"""

from __future__ import annotations

import enum
import json
import struct
from typing import Any

UNARY_CONTENT_TYPE = "application/json"
STREAM_CONTENT_TYPE = "application/connect+json"
END_STREAM_FLAG = 0x02
COMPRESSED_FLAG = 0x01
_HEADER = struct.Struct(">BI")


class Code(enum.StrEnum):
    """The Connect error codes the server answers with."""

    INVALID_ARGUMENT = "invalid_argument"
    NOT_FOUND = "not_found"
    ALREADY_EXISTS = "already_exists"
    PERMISSION_DENIED = "permission_denied"
    RESOURCE_EXHAUSTED = "resource_exhausted"
    UNIMPLEMENTED = "unimplemented"
    INTERNAL = "internal"
    UNAVAILABLE = "unavailable"
    UNAUTHENTICATED = "unauthenticated"
    DEADLINE_EXCEEDED = "deadline_exceeded"


HTTP_STATUS: dict[Code, int] = {
    Code.INVALID_ARGUMENT: 400,
    Code.NOT_FOUND: 404,
    Code.ALREADY_EXISTS: 409,
    Code.PERMISSION_DENIED: 403,
    Code.RESOURCE_EXHAUSTED: 429,
    Code.UNIMPLEMENTED: 501,
    Code.INTERNAL: 500,
    Code.UNAVAILABLE: 503,
    Code.UNAUTHENTICATED: 401,
    Code.DEADLINE_EXCEEDED: 504,
}
"""The HTTP status of a unary call's error (Connect's table)."""


class ConnectError(Exception):
    """An RPC's failure, as the client gets it: a code and a message."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def as_json(self) -> dict[str, str]:
        return {"code": self.code.value, "message": self.message}


def envelope(message: dict[str, Any], *, end: bool = False) -> bytes:
    """One enveloped message of a stream (``end``: the end-of-stream message)."""
    payload = json.dumps(message, separators=(",", ":")).encode()
    return _HEADER.pack(END_STREAM_FLAG if end else 0, len(payload)) + payload


def end_of_stream(error: ConnectError | None = None) -> bytes:
    """The stream's last envelope: ``{}``, or the error that ended it."""
    return envelope({} if error is None else {"error": error.as_json()}, end=True)


def first_message(body: bytes, *, max_bytes: int) -> dict[str, Any]:
    """The one request message of a server-streaming call's enveloped body.

    Refused (``invalid_argument``): a torn or compressed envelope, one longer than the
    body or ``max_bytes``, anything after it, and a message that is not a JSON object.
    """
    if len(body) < _HEADER.size:
        raise ConnectError(Code.INVALID_ARGUMENT, "the request holds no complete envelope")
    flags, length = _HEADER.unpack_from(body)
    if flags & COMPRESSED_FLAG:
        raise ConnectError(Code.INVALID_ARGUMENT, "compressed messages are not accepted")
    if flags & END_STREAM_FLAG:
        raise ConnectError(Code.INVALID_ARGUMENT, "a request cannot be an end-of-stream message")
    if length > max_bytes:
        raise ConnectError(Code.RESOURCE_EXHAUSTED, f"message of {length} bytes, over {max_bytes}")
    if len(body) != _HEADER.size + length:
        raise ConnectError(
            Code.INVALID_ARGUMENT, "the envelope's length does not match the request body"
        )
    return json_object(body[_HEADER.size :])


def json_object(payload: bytes) -> dict[str, Any]:
    """A request message: a JSON object, else ``invalid_argument``."""
    try:
        message = json.loads(payload or b"{}")
    except (ValueError, RecursionError):
        raise ConnectError(Code.INVALID_ARGUMENT, "the request is not valid JSON") from None
    if not isinstance(message, dict):
        raise ConnectError(Code.INVALID_ARGUMENT, "the request is not a JSON object")
    return message


def string_field(message: dict[str, Any], name: str, *, required: bool = True) -> str:
    """A string field of a request (proto3: absent means empty)."""
    value = message.get(name, "")
    if not isinstance(value, str):
        raise ConnectError(Code.INVALID_ARGUMENT, f"{name} must be a string")
    if required and not value:
        raise ConnectError(Code.INVALID_ARGUMENT, f"{name} is required")
    return value


def timeout_seconds(header: str | None) -> float | None:
    """The call's deadline from ``Connect-Timeout-Ms`` (None: none, or not a number)."""
    # ASCII digits only: str.isdigit() also takes "²", which int() refuses.
    if header is None or not (header.isascii() and header.isdigit()) or len(header) > 10:
        return None
    milliseconds = int(header)
    return milliseconds / 1000 if milliseconds > 0 else None
