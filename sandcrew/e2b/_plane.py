"""What every sandbox-plane route does first, and the streamed answer that sees its client go.

The SDK addresses a sandbox with the ``E2b-Sandbox-Id`` header (all sandbox traffic goes
to the one ``E2B_SANDBOX_URL``) and proves it may with the sandbox's access token, as
``X-Access-Token`` (envd, ``/execute``) or ``E2B-Traffic-Access-Token`` (the context
calls); both are checked in constant time. An unknown sandbox gets "was not found",
which the SDK reads as a sandbox that was killed or timed out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sandcrew._http_serving import Receive, Scope, Send
from sandcrew.e2b._sandboxes import HostedSandbox, Refusal, SandboxRegistry

ErrorAnswer = Callable[[int, str], Response]

TOKEN_HEADERS = ("x-access-token", "e2b-traffic-access-token")
SANDBOX_NOT_FOUND_STATUS = 502
"""The status of E2B's proxy for a sandbox that is gone: the SDK's "not running" error."""


def sandbox_of(
    request: Request, registry: SandboxRegistry, error: ErrorAnswer
) -> HostedSandbox | Response:
    """The sandbox a sandbox-plane request is for, once its token is checked."""
    sandbox_id = request.headers.get("e2b-sandbox-id")
    if not sandbox_id:
        return error(400, "the E2b-Sandbox-Id header is missing (set E2B_SANDBOX_URL)")
    try:
        hosted = registry.get(sandbox_id)
    except Refusal as refused:
        return error(SANDBOX_NOT_FOUND_STATUS, refused.message)
    if not token_offered(hosted, request.headers):
        return error(401, "wrong or missing access token for this sandbox")
    return hosted


def token_offered(hosted: HostedSandbox, headers: Mapping[str, str]) -> bool:
    """Whether ``headers`` carry ``hosted``'s access token, in either header the SDK uses."""
    return any(hosted.token_matches(headers.get(name)) for name in TOKEN_HEADERS)


PlaneHandler = Callable[[Request, HostedSandbox], Awaitable["Response | WatchedStream"]]
"""A sandbox-plane handler, given the sandbox its request is for."""


def guarded(
    registry: SandboxRegistry, error: ErrorAnswer, handler: PlaneHandler
) -> Callable[[Request], Awaitable[Response | WatchedStream]]:
    """``handler`` behind :func:`sandbox_of`; a :class:`Refusal` it raises becomes
    ``error``'s answer (each plane has its own shape)."""

    async def answer(request: Request) -> Response | WatchedStream:
        hosted = sandbox_of(request, registry, error)
        if isinstance(hosted, Response):
            return hosted
        try:
            return await handler(request, hosted)
        except Refusal as refused:
            return error(refused.status, refused.message)

    return answer


async def json_object(request: Request) -> dict[str, Any]:
    """The request's body, a JSON object (an empty body is an empty one); else a 400."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        raise Refusal(400, "the request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise Refusal(400, "the request body must be a JSON object")
    return body


class WatchedStream:
    """A streamed answer that stops producing the moment its client disconnects.

    The request's body is read before this runs, so the next message of ``receive`` can
    only be the disconnect: it is watched beside the producer, and when it comes the
    producer is cancelled at its current ``await`` (its ``finally`` runs: a cell is
    interrupted, a command killed) even if it had nothing to send then.
    """

    def __init__(
        self,
        chunks: AsyncGenerator[bytes],
        *,
        media_type: str,
        on_gone: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._chunks = chunks
        self._media_type = media_type
        self._on_gone = on_gone

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.ensure_future(watch())
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", self._media_type.encode())],
                }
            )
            if await self._pump(send, gone):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client went away while a chunk was being sent
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            await self._chunks.aclose()

    async def _pump(self, send: Send, gone: asyncio.Event) -> bool:
        """Send every chunk; False if the client went first."""
        waiting_for_gone = asyncio.ensure_future(gone.wait())
        try:
            while True:
                following = asyncio.ensure_future(anext(self._chunks))
                await asyncio.wait({following, waiting_for_gone}, return_when="FIRST_COMPLETED")
                if not following.done():
                    following.cancel()
                    with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                        await following
                    if self._on_gone is not None:
                        await asyncio.shield(self._on_gone())
                    return False
                try:
                    chunk = following.result()
                except StopAsyncIteration:
                    return True
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            waiting_for_gone.cancel()
