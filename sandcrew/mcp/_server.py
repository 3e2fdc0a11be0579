"""The MCP server: sandcrew's tool contracts on the official SDK's low-level server.

Errors follow the protocol's split: a call the server refuses (unknown tool, arguments
that do not match the schema, limits exceeded, code too large, unknown language) is an
MCP error (``-32602`` invalid params) naming the problem; an infrastructure failure
(Docker unreachable, image missing) is a tool result with ``isError`` so the client's
model can read it; a program's own failure is an ordinary result.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from typing import Any, Literal

import mcp_types as types
import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from sandcrew.core import ConfigurationError, SandcrewError, UserError
from sandcrew.crew import CrewSettings
from sandcrew.functions import FunctionTool, ToolResult
from sandcrew.mcp._sessions import owner_of
from sandcrew.mcp._toolbox import CURRENT_CALL, CallScope, SandboxToolbox
from sandcrew.mcp._tools import MIB, MIN_MEMORY_MIB, ServerLimits, tool_contracts
from sandcrew.sandbox import CodeTooLargeError

Transport = Literal["stdio", "streamable-http"]

SERVER_NAME = "sandcrew"
_log = logging.getLogger("sandcrew.mcp")


def build_server(toolbox: SandboxToolbox, limits: ServerLimits, *, with_solve: bool) -> Server[Any]:
    """An MCP server offering ``run_code``, ``list_languages`` (and ``solve``) over ``toolbox``."""
    from sandcrew import __version__

    tools = {tool.name: tool for tool in tool_contracts(limits, toolbox, with_solve=with_solve)}
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
        token = CURRENT_CALL.set(scope)
        try:
            # Clients here are programs: loose arguments are refused, not repaired.
            outcome = await tool.acall_json(json.dumps(params.arguments or {}), repair=False)
        finally:
            CURRENT_CALL.reset(token)
        if outcome.ok:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=outcome.content)],
                structured_content=json.loads(outcome.content),
            )
        error = scope.raised
        if error is None or isinstance(error, UserError):
            raise MCPError(code=types.INVALID_PARAMS, message=_refusal(tool.name, outcome, error))
        if not isinstance(error, SandcrewError):
            _log.error("%s failed unexpectedly", tool.name, exc_info=error)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"{tool.name} failed: {error}")],
            is_error=True,
        )

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
    max_sessions: int | None = None,
    session_idle_timeout: float | None = None,
    session_lifetime: float | None = None,
) -> None:
    """Serve until the client goes away (stdio) or the process is told to stop.

    Every run still going when the server stops is cancelled and its container removed.
    SIGTERM (which stdio clients send when the server does not exit at once after its
    input closes) ends the serving, and the cleanup still goes on.
    """
    limits = limits_of(
        settings,
        allow_network=allow_network,
        max_sessions=max_sessions,
        session_idle_timeout=session_idle_timeout,
        session_lifetime=session_lifetime,
    )
    toolbox = SandboxToolbox(settings, limits)
    server = build_server(toolbox, limits, with_solve=with_solve)
    loop = asyncio.get_running_loop()
    if transport == "stdio":
        serving = asyncio.ensure_future(_run_stdio(server))
    else:
        serving = asyncio.ensure_future(_serve_http(server, host=host, port=port))
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


async def _serve_http(server: Server[Any], *, host: str, port: int) -> None:
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    # uvicorn stops on SIGINT and SIGTERM by itself, finishing open requests first.
    await uvicorn.Server(config).serve()
