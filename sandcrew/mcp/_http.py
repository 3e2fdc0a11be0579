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
import json
from collections.abc import MutableMapping
from dataclasses import dataclass, field

from sandcrew._http_serving import (
    AsgiApp,
    Message,
    Receive,
    Scope,
    Send,
    bounded_body,
    is_loopback,
)
from sandcrew.core import ConfigurationError

CALLER_KEY = "sandcrew.caller"
"""Where a request's :class:`HttpCaller` is kept in its ASGI scope."""
AUTH_TOKEN_VARIABLE = "SANDCREW_MCP_AUTH_TOKEN"
"""The environment variable ``sandcrew mcp`` reads the bearer token from."""
MIN_TOKEN_CHARS = 16


@dataclass(eq=False)
class HttpCaller:
    """One HTTP request to the MCP endpoint: whom it counts against, and whether it is gone."""

    client: str
    gone: asyncio.Event = field(default_factory=asyncio.Event)
    why_gone: str = "the client went away"


def caller_of(request: object) -> HttpCaller | None:
    """The :class:`HttpCaller` of the SDK's request object (None over stdio)."""
    scope = getattr(request, "scope", None)
    if not isinstance(scope, MutableMapping):
        return None
    caller = scope.get(CALLER_KEY)
    return caller if isinstance(caller, HttpCaller) else None


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


def body_limit(max_code_bytes: int, max_input_bytes: int) -> int:
    """The largest request body served: a call with the largest program and input files,
    twice over for JSON's escapes, and a mebibyte for the rest of the message."""
    return 2 * (max_code_bytes + max_input_bytes) + (1 << 20)


class HttpGuard:
    """ASGI middleware: the bearer token, a bound on request bodies, and an
    :class:`HttpCaller` for every request."""

    def __init__(self, app: AsgiApp, *, token: str | None, max_body_bytes: int) -> None:
        self._app = app
        self._expected = None if token is None else f"Bearer {token}".encode()
        self._max_body_bytes = max_body_bytes
        self._callers: set[HttpCaller] = set()
        self._posts: set[HttpCaller] = set()
        self._no_posts = asyncio.Event()

    def stop_calls(self) -> None:
        """The server is stopping: every request in flight goes as if its client had gone
        (its tool call cancelled, its container removed), so that the server can stop."""
        for caller in self._callers:
            caller.why_gone = "the server is stopping"
            caller.gone.set()

    async def posts_answered(self, within: float) -> None:
        """Until every POST in flight (a tool call) has sent its answer, for ``within`` s at
        most; the long-lived event streams (GET) are not waited for."""
        if self._posts:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._no_posts.wait(), within)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            # The SDK's app serves HTTP only; anything else (a websocket) is refused.
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await self._app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if self._expected is not None and not hmac.compare_digest(
            headers.get(b"authorization", b""), self._expected
        ):
            await _refuse(send, 401, _UNAUTHORIZED)
            return
        # The SDK reads the whole body before anything else in any case.
        bounded = await bounded_body(receive, headers, self._max_body_bytes)
        if bounded is None:
            await _refuse(send, 413, self._too_large())
            return
        await self._serve(scope, bounded, send, headers)

    def _too_large(self) -> str:
        return f"request body larger than the server accepts ({self._max_body_bytes} bytes)"

    async def _serve(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[bytes, bytes]
    ) -> None:
        session = headers.get(b"mcp-session-id")
        peer = scope.get("client") or ("?", 0)
        client = f"session {session.decode('latin-1')}" if session else f"{peer[0]}:{peer[1]}"
        caller = HttpCaller(client)
        scope[CALLER_KEY] = caller
        self._callers.add(caller)
        if scope.get("method") == "POST":
            self._posts.add(caller)
            self._no_posts.clear()
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
            self._callers.discard(caller)
            self._posts.discard(caller)
            if not self._posts:
                self._no_posts.set()
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher


async def _watch_disconnect(receive: Receive, caller: HttpCaller) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    caller.gone.set()


_UNAUTHORIZED = "unauthorized: send the server's token as 'Authorization: Bearer <token>'"


async def _refuse(send: Send, status: int, why: str) -> None:
    body = json.dumps({"error": why}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="sandcrew"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
