"""The MCP server: sandcrew's tool contracts on the official SDK's low-level server.

Errors follow the protocol's split (specification 2025-11-25): a call to a tool the
server does not have is an MCP error (``-32602`` invalid params); arguments the tool
refuses (wrong types, limits exceeded, code too large, unknown language) and an
infrastructure failure (Docker unreachable, image missing) are tool results with
``isError``, whose text is written for the client's model to read and correct its call;
a program's own failure is an ordinary result.

Over HTTP the server wants its bearer token (required beyond loopback), holds at most
:class:`QueueLimits` calls per client and in all, and cancels a call whose client went
away (its container is removed): see :mod:`sandcrew.mcp._http`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import Any, Literal, TypeVar, cast

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from sandcrew._http_serving import PromptRequests, base_url, bound_socket
from sandcrew.core import ConfigurationError, SandcrewError, UserError
from sandcrew.errors import CodeTooLargeError
from sandcrew.functions import FunctionTool, ToolResult
from sandcrew.mcp._admission import Admission, QueueFull, QueueLimits
from sandcrew.mcp._http import (
    HttpCaller,
    HttpGuard,
    body_limit,
    caller_of,
    check_auth_token,
)
from sandcrew.mcp._sessions import owner_of
from sandcrew.mcp._stdin import stdin_lines
from sandcrew.mcp._toolbox import CURRENT_CALL, CallScope, SandboxToolbox
from sandcrew.mcp._tools import MIB, MIN_MEMORY_MIB, ServerLimits, tool_contracts
from sandcrew.settings import AppSettings

Transport = Literal["stdio", "streamable-http"]

SERVER_NAME = "sandcrew"
_log = logging.getLogger("sandcrew.mcp")
STDIO_CLIENT = "stdio"
MAX_CONNECTIONS = 256
"""HTTP connections and requests served at once (uvicorn answers 503 past it)."""

T = TypeVar("T")


def build_server(
    toolbox: SandboxToolbox,
    limits: ServerLimits,
    *,
    with_solve: bool,
    queue: QueueLimits | None = None,
) -> Server[Any]:
    """An MCP server offering ``run_code``, ``list_languages`` (and ``solve``) over ``toolbox``."""
    from sandcrew import __version__

    tools = {tool.name: tool for tool in tool_contracts(limits, toolbox, with_solve=with_solve)}
    admission = Admission(queue or QueueLimits())
    listing = [_describe(tool) for tool in tools.values()]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = tools.get(params.name)
        if tool is None:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"Unknown tool: {params.name!r} (this server has: {', '.join(tools)})",
            )
        scope = CallScope(report_progress=_progress_reporter(ctx), connection=owner_of(ctx))
        caller = caller_of(ctx.request)
        token = CURRENT_CALL.set(scope)
        try:
            with admission.admitted(STDIO_CLIENT if caller is None else caller.client):
                # Clients here are programs: loose arguments are refused, not repaired.
                called = tool.acall_json(json.dumps(params.arguments or {}), repair=False)
                outcome = await _unless_gone(called, caller)
        except QueueFull as full:
            return tool_error(f"{tool.name} refused: {full}")
        finally:
            CURRENT_CALL.reset(token)
        if outcome is None:
            why = caller.why_gone if caller is not None else "the client went away"
            return tool_error(f"{tool.name} cancelled: {why}")
        if outcome.ok:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=outcome.content)],
                structured_content=json.loads(outcome.content),
            )
        error = scope.raised
        if error is None or isinstance(error, UserError):
            message = _refusal(tool.name, outcome, error)
        else:
            if not isinstance(error, SandcrewError):
                _log.error("%s failed unexpectedly", tool.name, exc_info=error)
            message = f"{tool.name} failed: {error}"
        return tool_error(message)

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=(
            "run_code runs a program in a new, hardened, throwaway Docker container "
            "(no network unless the server allows it and the call asks, capped time, "
            "memory and output) and reports its output and exit code. The session_* tools "
            "keep a live interpreter between calls, like a notebook, until session_close."
        ),
        get_tool_input_schema=lambda name: (
            tools[name].contract.parameters_json_schema(strict=False) if name in tools else None
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def _unless_gone(work: Awaitable[T], caller: HttpCaller | None) -> T | None:
    """``work``'s result, or None once the HTTP client has gone away (the work is cancelled)."""
    if caller is None:
        return await work
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(caller.gone.wait())
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        await asyncio.wait({task})
        raise
    finally:
        gone.cancel()
    if task.done():
        return task.result()
    # The run's own cancellation removes its container before this returns.
    task.cancel()
    await asyncio.wait({task})
    return None


def tool_error(message: str) -> types.CallToolResult:
    """A tool execution error: the client's model reads ``message`` and may try again."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )


def _refusal(name: str, outcome: ToolResult, error: UserError | None) -> str:
    if error is None:
        return outcome.content  # the contract's own account of the arguments it refused
    if isinstance(error, CodeTooLargeError):
        # The sandbox's own hint (raise max_code_bytes) is not the client's to follow.
        return f"{name}: the code is {error.size} bytes; this server accepts at most {error.limit}"
    return f"{name}: {error}"


def _describe(tool: FunctionTool[..., Any]) -> types.Tool:
    contract = tool.contract
    return types.Tool(
        name=contract.name,
        description=contract.description,
        input_schema=contract.parameters_json_schema(strict=False),
        output_schema=contract.return_json_schema,
    )


def _progress_reporter(ctx: ServerRequestContext[Any]) -> Any:
    steps = 0

    async def report(message: str) -> None:
        nonlocal steps
        steps += 1
        await ctx.session.report_progress(steps, None, message)

    return report


def limits_of(settings: AppSettings, *, allow_network: bool) -> ServerLimits:
    """The server's limits: its sandbox settings' timeout and memory are the ceilings; the
    session caps are the ``[mcp]`` table's (its flags included)."""
    if settings.sandbox.memory_bytes < MIN_MEMORY_MIB * MIB:
        raise ConfigurationError(
            f"the MCP server needs a memory limit of at least {MIN_MEMORY_MIB}m "
            f"(got {settings.sandbox.memory_bytes} bytes)"
        )
    if settings.mcp.max_sessions > settings.mcp.max_sessions_total:
        raise ConfigurationError(
            f"--max-sessions ({settings.mcp.max_sessions}, per client) is more than "
            f"--max-sessions-total ({settings.mcp.max_sessions_total}, all clients)"
        )
    return ServerLimits(
        max_timeout=settings.sandbox.timeout,
        max_memory_bytes=settings.sandbox.memory_bytes,
        allow_network=allow_network,
        allowed_hosts=() if settings.sandbox.egress is None else settings.sandbox.egress.entries,
        sessions=settings.mcp,
    )


async def serve(
    settings: AppSettings,
    *,
    allow_network: bool = False,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    with_solve: bool = False,
    auth_token: str | None = None,
    on_listening: Callable[[str], None] | None = None,
) -> None:
    """Serve until the client goes away (stdio) or the process is told to stop.

    Every run still going when the server stops is cancelled and its container removed.
    SIGTERM ends the serving, and once the cleanup is done raises
    :class:`KeyboardInterrupt` (the exit status of a stopped command, 130), as Ctrl-C does
    under :func:`asyncio.run`. Over stdio, a SIGTERM that comes after the input ended (a
    client sends one when the server does not exit at once) changes nothing. Over HTTP,
    clients must send ``auth_token`` as a bearer token; beyond loopback one is required;
    ``on_listening`` gets the endpoint's URL once the server accepts connections (``port``
    0 picks a free one).
    """
    if transport != "stdio":
        check_auth_token(auth_token, host=host)
    elif sys.stdin is None or sys.stdout is None:
        # Python leaves them None when the descriptors were closed; a file opened later
        # could take descriptor 0 or 1 and be read or written as the client.
        raise ConfigurationError(
            "the stdio transport needs standard input and output (a client's pipes), and one "
            "is closed; start it from an MCP client, or use --transport streamable-http"
        )
    limits = limits_of(settings, allow_network=allow_network)
    toolbox = SandboxToolbox(settings, limits, session_limits=settings.sessions)
    server = build_server(
        toolbox, limits, with_solve=with_solve, queue=QueueLimits.of(settings.mcp)
    )
    loop = asyncio.get_running_loop()
    if transport == "stdio":
        serving = asyncio.ensure_future(_run_stdio(server))
        # Once the input ended, the serving is done and cancelling it does nothing: a
        # SIGTERM then (a stdio client sends one while the cleanup runs) leaves the exit 0.
        loop.add_signal_handler(signal.SIGTERM, serving.cancel)
    else:
        http = _HttpServer(
            server,
            host=host,
            port=port,
            auth_token=auth_token,
            max_body_bytes=body_limit(
                settings.sandbox.max_code_bytes, settings.sandbox.max_input_bytes
            ),
            on_listening=on_listening,
            client_idle_timeout=settings.mcp.client_idle_timeout,
        )
        # uvicorn takes SIGTERM and SIGINT while it serves (see _HttpServer.handle_exit).
        serving = asyncio.ensure_future(http.serve())
    try:
        await serving
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if not serving.cancelled() or (current is not None and current.cancelling()):
            raise
    finally:
        try:
            await toolbox.aclose()
        finally:
            if transport == "stdio":
                loop.remove_signal_handler(signal.SIGTERM)
    # Only SIGTERM cancels the serving here (a cancel from outside was raised above).
    if serving.cancelled() or (transport != "stdio" and http.interrupted):
        raise KeyboardInterrupt  # stopped cleanly, then said as every stopped command says it


async def _run_stdio(server: Server[Any]) -> None:
    # Only stdin is ours: the SDK still moves stdout aside, so that stray prints miss the wire.
    with stdin_lines() as client_lines:
        async with stdio_server(stdin=cast("anyio.AsyncFile[str]", client_lines)) as (
            read_stream,
            write_stream,
        ):
            await server.run(read_stream, write_stream, server.create_initialization_options())


STOP_GRACE = 10.0
"""Seconds a stopping HTTP server waits for the calls it cancelled to send their answers."""


class _HttpServer(uvicorn.Server):
    """uvicorn serving the SDK's app behind :class:`HttpGuard`, on a socket bound here (a
    port in use is one clear error), saying where it listens once it does.

    SIGTERM and Ctrl-C stop it cleanly, so that no traceback of a cut request is logged:
    the calls in flight are cancelled as if their clients had gone (their containers
    removed) and send that answer; then uvicorn stops as it does on its own (no new
    connection, the event streams ended, the session manager shut down). A second signal
    stops it at once.
    """

    def __init__(
        self,
        server: Server[Any],
        *,
        host: str,
        port: int,
        auth_token: str | None,
        max_body_bytes: int,
        on_listening: Callable[[str], None] | None,
        client_idle_timeout: float,
    ) -> None:
        self.guard = HttpGuard(
            server.streamable_http_app(host=host, session_idle_timeout=client_idle_timeout),
            token=auth_token,
            max_body_bytes=max_body_bytes,
        )
        super().__init__(
            uvicorn.Config(
                self.guard,
                host=host,
                port=port,
                log_level="warning",
                lifespan="on",
                # Connections and requests at once: past it a request gets 503 at once.
                limit_concurrency=MAX_CONNECTIONS,
                http=PromptRequests,
            )
        )
        self._on_listening = on_listening
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Task[None] | None = None
        self.interrupted = False
        """Stopped by SIGTERM or Ctrl-C."""

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets=sockets or [bound_socket(self.config.host, self.config.port)])

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self._on_listening is not None:
            self._on_listening(_endpoint_url(self.servers[0].sockets[0].getsockname()))

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # uvicorn's handler of SIGINT and SIGTERM while it serves; runs between two bytecodes
        # of the loop's thread, so the stop itself is scheduled on the loop.
        if self._stopping is not None or self._loop is None:
            super().handle_exit(sig, frame)  # a second signal: at once
            return
        self.interrupted = True
        self._loop.call_soon_threadsafe(self._stop)

    def _stop(self) -> None:
        if self._stopping is None:
            self.guard.stop_calls()
            self._stopping = asyncio.ensure_future(self._exit_once_answered())

    async def _exit_once_answered(self) -> None:
        await self.guard.posts_answered(STOP_GRACE)
        # Read by uvicorn's loop, and by the event streams (sse-starlette) to end themselves.
        self.should_exit = True


def _endpoint_url(address: tuple[Any, ...]) -> str:
    return f"{base_url(address)}/mcp"
