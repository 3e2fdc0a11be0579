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
from collections.abc import Awaitable
from typing import Any, Literal, TypeVar

import mcp_types as types
import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from sandcrew.core import ConfigurationError, SandcrewError, UserError
from sandcrew.crew import CrewSettings
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
from sandcrew.mcp._toolbox import CURRENT_CALL, CallScope, SandboxToolbox
from sandcrew.mcp._tools import MIB, MIN_MEMORY_MIB, ServerLimits, tool_contracts
from sandcrew.sandbox import CodeTooLargeError

Transport = Literal["stdio", "streamable-http"]

SERVER_NAME = "sandcrew"
_log = logging.getLogger("sandcrew.mcp")
STDIO_CLIENT = "stdio"
MAX_CONNECTIONS = 256
"""HTTP connections and requests served at once (uvicorn answers 503 past it)."""
CLIENT_IDLE_TIMEOUT = 60.0
"""Seconds an HTTP client's MCP session may go with no request in flight and no open event
stream before it ends (a client killed without its DELETE), closing its sandbox sessions."""
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
            return tool_error(f"{tool.name} cancelled: the client went away")
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


def limits_of(
    settings: CrewSettings,
    *,
    allow_network: bool,
    max_sessions: int | None = None,
    session_idle_timeout: float | None = None,
    session_lifetime: float | None = None,
) -> ServerLimits:
    """The server's limits: its sandbox settings' timeout and memory are the ceilings.

    The session caps left ``None`` keep :class:`ServerLimits`' defaults.
    """
    if settings.sandbox.memory_bytes < MIN_MEMORY_MIB * MIB:
        raise ConfigurationError(
            f"the MCP server needs a memory limit of at least {MIN_MEMORY_MIB}m "
            f"(got {settings.sandbox.memory_bytes} bytes)"
        )
    caps: dict[str, Any] = {
        "max_sessions": max_sessions,
        "session_idle_timeout": session_idle_timeout,
        "session_lifetime": session_lifetime,
    }
    return ServerLimits(
        max_timeout=settings.sandbox.timeout,
        max_memory_bytes=settings.sandbox.memory_bytes,
        allow_network=allow_network,
        **{name: value for name, value in caps.items() if value is not None},
    )


async def serve(
    settings: CrewSettings,
    *,
    allow_network: bool = False,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    with_solve: bool = False,
    auth_token: str | None = None,
    queue: QueueLimits | None = None,
    max_sessions: int | None = None,
    session_idle_timeout: float | None = None,
    session_lifetime: float | None = None,
    client_idle_timeout: float = CLIENT_IDLE_TIMEOUT,
) -> None:
    """Serve until the client goes away (stdio) or the process is told to stop.

    Every run still going when the server stops is cancelled and its container removed.
    SIGTERM (which stdio clients send when the server does not exit at once after its
    input closes) ends the serving, and the cleanup still goes on. Over HTTP, clients
    must send ``auth_token`` as a bearer token; beyond loopback one is required.
    """
    if transport != "stdio":
        check_auth_token(auth_token, host=host)
    limits = limits_of(
        settings,
        allow_network=allow_network,
        max_sessions=max_sessions,
        session_idle_timeout=session_idle_timeout,
        session_lifetime=session_lifetime,
    )
    toolbox = SandboxToolbox(settings, limits)
    server = build_server(toolbox, limits, with_solve=with_solve, queue=queue)
    loop = asyncio.get_running_loop()
    if transport == "stdio":
        serving = asyncio.ensure_future(_run_stdio(server))
    else:
        serving = asyncio.ensure_future(
            _serve_http(
                server,
                host=host,
                port=port,
                auth_token=auth_token,
                max_body_bytes=body_limit(
                    settings.sandbox.max_code_bytes, settings.sandbox.max_input_bytes
                ),
                client_idle_timeout=client_idle_timeout,
            )
        )
    # uvicorn handles SIGTERM itself while it serves, then restores this handler and
    # raises the signal again: by then the serving is over and the cleanup goes on.
    loop.add_signal_handler(signal.SIGTERM, serving.cancel)
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
            loop.remove_signal_handler(signal.SIGTERM)


async def _run_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def _serve_http(
    server: Server[Any],
    *,
    host: str,
    port: int,
    auth_token: str | None,
    max_body_bytes: int,
    client_idle_timeout: float,
) -> None:
    app = HttpGuard(
        server.streamable_http_app(host=host, session_idle_timeout=client_idle_timeout),
        token=auth_token,
        max_body_bytes=max_body_bytes,
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        # Connections and requests at once: past it a request gets 503 at once.
        limit_concurrency=MAX_CONNECTIONS,
    )
    # uvicorn stops on SIGINT and SIGTERM by itself, finishing open requests first.
    await uvicorn.Server(config).serve()
