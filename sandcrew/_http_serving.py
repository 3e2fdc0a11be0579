"""What every HTTP server of sandcrew (``sandcrew mcp``, ``sandcrew e2b``) does the same way:
which hosts count as loopback, the listening socket, a deadline for each request's head, and
request bodies read within a bound.

The servers are ASGI apps behind uvicorn; these helpers are plain functions over ASGI's
``receive`` so that each server's own guard stays a thin layer of its own rules.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from sandcrew.core import ConfigurationError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]


REQUEST_HEAD_SECONDS = 10.0
"""How long a connection may take to send a whole request head, once open or answered."""


class PromptRequests(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, with a deadline for each request's head.

    A connection that opens, or has had its answer, and then sends no whole request head
    within :data:`REQUEST_HEAD_SECONDS` is closed. uvicorn alone closes only keep-alive
    connections that send nothing at all after an answer: connections that never send a
    request, or send one byte at a time, would hold the server's connection slots (and
    lock every client out) for as long as they stay open.
    """

    _head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_a_head()

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle:  # a whole request head came
            self._stop_waiting()

    def on_response_complete(self) -> None:
        # Before uvicorn goes on: a request already received starts at once and stops it.
        self._await_a_head()
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def _await_a_head(self) -> None:
        self._stop_waiting()
        self._head_deadline = self.loop.call_later(REQUEST_HEAD_SECONDS, self._head_too_late)

    def _stop_waiting(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_late(self) -> None:
        self._head_deadline = None
        if not self.transport.is_closing():
            self.transport.close()


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
