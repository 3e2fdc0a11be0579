"""`sandcrew mcp`: serve sandcrew's tools to MCP clients (stdio or streamable HTTP)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from sandcrew.cli._docker import sandbox_overrides
from sandcrew.errors import ConfigurationError
from sandcrew.settings import load_crew_settings


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
        typer.Option(help="Longest run a client may ask for, seconds.", show_default="10"),
    ] = None,
    memory: Annotated[
        str | None,
        typer.Option(help="Most memory a client may ask for (256m, 1g).", show_default="256m"),
    ] = None,
    allow_network: Annotated[
        bool,
        typer.Option("--allow-network", help="Let a client ask for network access in a run."),
    ] = False,
    image: Annotated[str | None, typer.Option(help="Sandbox image for the runs.")] = None,
    model: Annotated[str | None, typer.Option(help="Model of the crew behind `solve`.")] = None,
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible endpoint of the crew behind `solve`.")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(help="TOML settings file (default ~/.config/sandcrew/config.toml)."),
    ] = None,
) -> None:
    """Serve run_code, list_languages (and solve, when a model is configured) over MCP.

    Clients may lower a run's timeout and memory and turn its network on only where the
    server allows it; the limits here (and the settings file's sandbox table) are the ceilings.
    """
    if transport not in ("stdio", "streamable-http"):
        raise ConfigurationError(
            f"--transport must be stdio or streamable-http (got {transport!r})"
        )
    settings = load_crew_settings(
        {
            "model": model,
            "base_url": base_url,
            "sandbox": sandbox_overrides(timeout=timeout, memory=memory, image=image),
        },
        config_path=config,
    )
    try:
        settings.api_key_value()
    except ConfigurationError:
        with_solve = False
    else:
        with_solve = True

    from sandcrew.mcp import serve  # the optional SDK: imported only for this command

    asyncio.run(
        serve(
            settings,
            allow_network=allow_network,
            transport="stdio" if transport == "stdio" else "streamable-http",
            host=host,
            port=port,
            with_solve=with_solve,
        )
    )


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)
