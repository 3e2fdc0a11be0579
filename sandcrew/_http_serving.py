"""What every HTTP server of sandcrew (``sandcrew mcp``, ``sandcrew e2b``) does the same way:
which hosts count as loopback, the listening socket, and request bodies read within a bound.

The servers are ASGI apps behind uvicorn; these helpers are plain functions over ASGI's
``receive`` so that each server's own guard stays a thin layer of its own rules.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from sandcrew.core import ConfigurationError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bound_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` for uvicorn to listen on; a clear error if it cannot."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as error:
        raise ConfigurationError(f"--host {host}: not an address to listen on ({error})") from None
    listening = socket.socket(family, kind, proto)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind(address)
    except OSError as error:
        listening.close()
        raise ConfigurationError(
            f"cannot listen on {host}:{port} ({error.strerror or error}): choose another --port "
            "(0 picks a free one)"
        ) from None
    return listening


def base_url(address: tuple[Any, ...]) -> str:
    """``http://host:port`` of a listening socket's address."""
    host, port = str(address[0]), int(address[1])
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


async def bounded_body(receive: Receive, headers: dict[bytes, bytes], limit: int) -> Receive | None:
    """``receive`` for the app, its body read here whole, or None when the body is larger
    than ``limit`` bytes (declared so, or found so: a chunked body declares no length).

    The whole body is read before the app runs, so that a limit holds whatever the app
    does; the next message the app receives after it can only be the disconnect.
    """
    declared = headers.get(b"content-length", b"0")
    if not declared.isdigit() or int(declared) > limit:
        return None
    body = await _read_body(receive, limit)
    return None if body is None else _replaying(body, receive)


async def _read_body(receive: Receive, limit: int) -> list[Message] | None:
    """The request's body messages, or None once they pass ``limit`` bytes (the rest unread).

    A disconnect before the end is kept as the last message, for the app to see.
    """
    messages: list[Message] = []
    read = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages
        read += len(message.get("body", b""))
        if read > limit:
            return None
        if not message.get("more_body"):
            return messages


def _replaying(messages: list[Message], receive: Receive) -> Receive:
    """``receive`` that first gives the messages already read."""
    pending = iter(messages)

    async def replay_then_receive() -> Message:
        message = next(pending, None)
        return message if message is not None else await receive()

    return replay_then_receive
