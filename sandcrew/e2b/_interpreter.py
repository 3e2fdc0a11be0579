"""The code interpreter's routes: ``/execute`` (a cell, streamed) and ``/contexts``.

A cell runs in the sandbox's session, in its default namespace or in a context's; its
events go out as they come (:mod:`._execute`). A client that goes away before the cell
ends (the SDK's ``timeout``) interrupts it: the state is kept and the next cell runs.
Only Python runs here; other languages answer that they are not served.
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import AsyncGenerator, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sandcrew.core import UserError
from sandcrew.e2b._errors import not_implemented, text_error
from sandcrew.e2b._execute import encode_event, error_line
from sandcrew.e2b._plane import PlaneHandler, WatchedStream, guarded, json_object
from sandcrew.e2b._sandboxes import (
    DEFAULT_CONTEXT_ID,
    WORKDIR,
    HostedSandbox,
    Refusal,
    SandboxRegistry,
)
from sandcrew.sandbox import SessionClosedError

NDJSON = "application/x-ndjson"
LANGUAGES = ("python", None)


class Interpreter:
    """The code interpreter's routes, over one :class:`SandboxRegistry`."""

    def __init__(self, registry: SandboxRegistry, *, max_cell_timeout: float) -> None:
        self._registry = registry
        self._max_cell_timeout = max_cell_timeout

    def routes(self) -> list[Route]:
        return [
            Route("/execute", self._guarded(self._execute), methods=["POST"]),
            Route("/contexts", self._guarded(self._create_context), methods=["POST"]),
            Route("/contexts", self._guarded(self._list_contexts), methods=["GET"]),
            Route(
                "/contexts/{context_id}", self._guarded(self._remove_context), methods=["DELETE"]
            ),
            Route(
                "/contexts/{context_id}/restart",
                self._guarded(self._restart_context),
                methods=["POST"],
            ),
        ]

    def _guarded(
        self, handler: PlaneHandler
    ) -> Callable[[Request], Awaitable[Response | WatchedStream]]:
        """``handler`` for the sandbox the request names (its token checked), its refusals
        answered as the code interpreter answers them (plain text)."""
        return guarded(self._registry, text_error, handler)

    async def _execute(self, request: Request, hosted: HostedSandbox) -> Response | WatchedStream:
        body = await json_object(request)
        code, language, context_id = body.get("code"), body.get("language"), body.get("context_id")
        if not isinstance(code, str):
            raise Refusal(400, "code (a string) is required")
        if language not in LANGUAGES:
            raise Refusal(400, not_implemented(f"running {language!r} code (python is served)"))
        if body.get("env_vars"):
            raise Refusal(400, not_implemented("environment variables per cell"))
        context: str | None = None
        if context_id is not None:
            if not isinstance(context_id, str):
                raise Refusal(400, "context_id must be a string")
            if context_id not in hosted.contexts:
                raise Refusal(404, f"context {context_id!r} not found")
            context = None if context_id == DEFAULT_CONTEXT_ID else context_id
        if not code.strip():
            raise Refusal(400, "code is empty")
        limit = min(self._max_cell_timeout, max(hosted.remaining(), 1.0))
        return WatchedStream(
            _cell_lines(hosted, code, context=context, limit=limit), media_type=NDJSON
        )

    async def _create_context(self, request: Request, hosted: HostedSandbox) -> Response:
        body = await json_object(request)
        language, cwd = body.get("language"), body.get("cwd") or WORKDIR
        if language not in LANGUAGES:
            raise Refusal(400, not_implemented(f"a {language!r} context (python is served)"))
        if not isinstance(cwd, str) or posixpath.normpath(cwd) != WORKDIR:
            raise Refusal(
                400, not_implemented(f"a context in {cwd!r} (contexts start in {WORKDIR})")
            )
        return JSONResponse(self._registry.new_context(hosted, cwd=WORKDIR).as_json())

    async def _list_contexts(self, request: Request, hosted: HostedSandbox) -> Response:
        return JSONResponse([context.as_json() for context in hosted.contexts.values()])

    async def _remove_context(self, request: Request, hosted: HostedSandbox) -> Response:
        context_id = request.path_params["context_id"]
        if context_id == DEFAULT_CONTEXT_ID:
            raise Refusal(400, "the default context cannot be removed")
        if hosted.contexts.pop(context_id, None) is None:
            raise Refusal(404, f"context {context_id!r} not found")
        await hosted.session.drop_context(context_id)
        return Response(status_code=204)

    async def _restart_context(self, request: Request, hosted: HostedSandbox) -> Response:
        context_id = request.path_params["context_id"]
        if context_id not in hosted.contexts:
            raise Refusal(404, f"context {context_id!r} not found")
        try:
            if context_id == DEFAULT_CONTEXT_ID:
                # The default namespace is the interpreter's own: a fresh interpreter.
                await hosted.session.restart()
            else:
                await hosted.session.reset_context(context_id)
        except SessionClosedError:
            raise Refusal(502, f"The sandbox {hosted.id} was not found") from None
        return Response(status_code=204)


async def _cell_lines(
    hosted: HostedSandbox, code: str, *, context: str | None, limit: float
) -> AsyncGenerator[bytes]:
    # A client that goes away before its cell's end has that cell interrupted (the state
    # stays); a cell still queued behind another client's is never started.
    events = hosted.session.stream(
        code, timeout=limit, context=context, interrupt_if_abandoned=True
    )
    try:
        async with contextlib.aclosing(events):
            async for event in events:
                yield encode_event(event)
    except UserError as refused:
        yield error_line("ValueError", str(refused))
    except SessionClosedError as ended:
        yield error_line("SandboxError", f"the sandbox ended: {ended}")
