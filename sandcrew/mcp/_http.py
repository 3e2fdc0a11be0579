"""What stands before the MCP server on HTTP: the bearer token, and who each request is from.

:class:`HttpGuard` wraps the SDK's Starlette app. It refuses a request without the
server's bearer token (``401``, compared in constant time), and gives every request a
:class:`HttpCaller` in its ASGI scope: the client it counts against (its MCP session,
else its connection) and an event set when the client goes away, so that a tool
call in flight is cancelled then and its container removed. The SDK hands the
request (with that scope) to each tool call, whatever task runs the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from sandcrew.core import ConfigurationError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CALLER_KEY = "sandcrew.caller"
"""Where a request's :class:`HttpCaller` is kept in its ASGI scope."""
AUTH_TOKEN_VARIABLE = "SANDCREW_MCP_AUTH_TOKEN"
"""The environment variable ``sandcrew mcp`` reads the bearer token from."""
MIN_TOKEN_CHARS = 16


@dataclass
class HttpCaller:
    """One HTTP request to the MCP endpoint: whom it counts against, and whether it is gone."""

    client: str
    gone: asyncio.Event = field(default_factory=asyncio.Event)


def caller_of(request: object) -> HttpCaller | None:
    """The :class:`HttpCaller` of the SDK's request object (None over stdio)."""
    scope = getattr(request, "scope", None)
    if not isinstance(scope, MutableMapping):
        return None
    caller = scope.get(CALLER_KEY)
    return caller if isinstance(caller, HttpCaller) else None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_auth_token(token: str | None, *, host: str) -> None:
    """Refuse to serve beyond loopback without a token, and a token too short to be one."""
    if token is None:
        if not is_loopback(host):
            raise ConfigurationError(
                f"listening on {host} needs a bearer token: pass --auth-token or set "
                f"{AUTH_TOKEN_VARIABLE} (clients then send 'Authorization: Bearer <token>')"
            )
        return
    if len(token) < MIN_TOKEN_CHARS or not token.isascii() or not token.isprintable():
        raise ConfigurationError(
            f"the bearer token must be at least {MIN_TOKEN_CHARS} printable ASCII characters "
            "(for example: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )


class HttpGuard:
    """ASGI middleware: the bearer token, and an :class:`HttpCaller` for every request."""

    def __init__(self, app: AsgiApp, *, token: str | None) -> None:
        self._app = app
        self._expected = None if token is None else f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if self._expected is not None and not hmac.compare_digest(
            headers.get(b"authorization", b""), self._expected
        ):
            await _unauthorized(send)
            return
        session = headers.get(b"mcp-session-id")
        peer = scope.get("client") or ("?", 0)
        client = f"session {session.decode('latin-1')}" if session else f"{peer[0]}:{peer[1]}"
        caller = HttpCaller(client)
        scope[CALLER_KEY] = caller
        watcher: asyncio.Task[None] | None = None

        async def receive_and_watch() -> Message:
            # Once the body is read, the next message can only be the disconnect: watch for it.
            nonlocal watcher
            message = await receive()
            if message["type"] == "http.disconnect":
                caller.gone.set()
            elif not message.get("more_body") and watcher is None:
                watcher = asyncio.ensure_future(_watch_disconnect(receive, caller))
            return message

        try:
            await self._app(scope, receive_and_watch, send)
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher


async def _watch_disconnect(receive: Receive, caller: HttpCaller) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    caller.gone.set()


async def _unauthorized(send: Send) -> None:
    body = json.dumps(
        {"error": "unauthorized: send the server's token as 'Authorization: Bearer <token>'"}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="sandcrew"'),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
