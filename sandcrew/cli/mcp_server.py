"""`sandcrew mcp`: serve sandcrew's tools to MCP clients (stdio or streamable HTTP)."""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated

import typer

from sandcrew.cli import _options as options
from sandcrew.cli._errors import Interrupted
from sandcrew.errors import ConfigurationError
from sandcrew.settings import McpSettings


def mcp(
    transport: Annotated[
        str,
        typer.Option(help="stdio (a client starts the server) or streamable-http."),
    ] = "stdio",
    host: Annotated[
        str, typer.Option(help="Address to listen on (streamable-http).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (streamable-http).")] = 8000,
    timeout: Annotated[
        float | None,
        typer.Option(
            help="Longest run a client may ask for, seconds.",
            show_default=f"{options.RUN_TIMEOUT_DEFAULT:g}",
        ),
    ] = None,
    memory: Annotated[
        int | None,
        typer.Option(
            parser=options.parse_memory,
            metavar="SIZE",
            help="Most memory a client may ask for (256m, 1g).",
            show_default=options.MEMORY_DEFAULT,
        ),
    ] = None,
    allow_network: Annotated[
        bool,
        typer.Option("--allow-network", help="Let a client ask for network access in a run."),
    ] = False,
    allow_host: options.AllowHost = None,
    secret_header: options.SecretHeader = None,
    image: Annotated[str | None, typer.Option(help="Sandbox image for the runs.")] = None,
    max_sessions: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Sessions one client may hold open at once (0: no session tools).",
            show_default=_shown("max_sessions"),
        ),
    ] = None,
    session_idle_timeout: Annotated[
        float | None,
        typer.Option(
            min=1,
            help="Close a session after this many seconds without a call.",
            show_default=_shown("session_idle_timeout"),
        ),
    ] = None,
    session_lifetime: Annotated[
        float | None,
        typer.Option(
            min=1,
            help="Close a session this many seconds after it started.",
            show_default=_shown("session_lifetime"),
        ),
    ] = None,
    max_sessions_total: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Sessions all clients together may hold open (one cap for the whole server).",
            show_default=_shown("max_sessions_total"),
        ),
    ] = None,
    client_idle_timeout: Annotated[
        float | None,
        typer.Option(
            min=1,
            help="Over HTTP: end a client's MCP session, and close its sessions, after this "
            "many seconds with no request in flight and no open event stream (a client "
            "killed without closing).",
            show_default=_shown("client_idle_timeout"),
        ),
    ] = None,
    auth_token: Annotated[
        str | None,
        typer.Option(
            envvar="SANDCREW_MCP_AUTH_TOKEN",
            show_envvar=True,
            help="Bearer token HTTP clients must send (required beyond loopback; "
            "prefer the environment variable, which other users cannot see in ps).",
        ),
    ] = None,
    max_queued_per_client: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Tool calls one client may have running or waiting at once.",
            show_default=_shown("max_pending_per_client"),
        ),
    ] = None,
    max_queued: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Tool calls all clients together may have running or waiting at once.",
            show_default=_shown("max_pending"),
        ),
    ] = None,
    model: options.Model = None,
    base_url: options.BaseUrl = None,
    config: options.Config = None,
) -> None:
    """Serve run_code, list_languages, the session tools (and solve, with a model) over MCP.

    Clients may lower a run's timeout and memory and turn its network on only where the
    server allows it; the limits here (and the settings file's sandbox table) are the ceilings.
    --allow-host and --secret-header list the hosts a client may name for a run or a
    session (allow_hosts); a run reaches none unless its client names them.
    """
    if transport not in ("stdio", "streamable-http"):
        raise ConfigurationError(
            f"--transport must be stdio or streamable-http (got {transport!r})"
        )
    settings = options.settings_from_options(
        config=config,
        model=model,
        base_url=base_url,
        sandbox=options.sandbox_flags(
            run_timeout=timeout,
            memory=memory,
            image=image,
            allow_hosts=allow_host,
            secret_headers=secret_header,
        ),
        mcp={
            "max_sessions": max_sessions,
            "max_sessions_total": max_sessions_total,
            "session_idle_timeout": session_idle_timeout,
            "session_lifetime": session_lifetime,
            "client_idle_timeout": client_idle_timeout,
            "max_pending_per_client": max_queued_per_client,
            "max_pending": max_queued,
        },
    )
    with_solve = settings.endpoint.configured

    # The optional SDK: imported only for this command.
    from sandcrew.cli._terminal import log_to_stderr
    from sandcrew.mcp import serve
    from sandcrew.mcp._http import check_auth_token

    log_to_stderr()
    if transport != "stdio":
        check_auth_token(auth_token, host=host)
    serving = serve(
        settings,
        allow_network=allow_network,
        transport="stdio" if transport == "stdio" else "streamable-http",
        host=host,
        port=port,
        with_solve=with_solve,
        auth_token=auth_token,
        on_listening=_say_listening,
    )
    try:
        asyncio.run(serving)
    except KeyboardInterrupt:
        # serve() cancelled the runs in flight and closed the sessions before this.
        raise Interrupted(
            "the server stopped; its calls in flight were cancelled and their containers removed"
        ) from None


def _say_listening(url: str) -> None:
    print(f"listening on {url}", file=sys.stderr, flush=True)


def _shown(name: str) -> str:
    """The ``[mcp]`` setting's default, as ``--help`` shows it."""
    return f"{McpSettings.model_fields[name].default:g}"
