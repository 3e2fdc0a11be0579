"""`sandcrew e2b`: serve E2B's sandbox API on this machine (needs ``sandcrew[e2b]``)."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from sandcrew.cli import _options as options
from sandcrew.cli._errors import Interrupted
from sandcrew.settings import E2bSettings

if TYPE_CHECKING:
    from sandcrew.e2b import Listening


def e2b(
    host: Annotated[
        str, typer.Option(help="Address to listen on (beyond loopback: --api-key needed).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, help="Port to listen on (0: a free one).")] = 49999,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="SANDCREW_E2B__API_KEY",
            show_envvar=True,
            help="The key clients send as E2B_API_KEY (generated and printed when absent; "
            "prefer the environment variable, which other users cannot see in ps).",
        ),
    ] = None,
    max_sandboxes: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Sandboxes the server holds at once.",
            show_default=_shown("max_sandboxes"),
        ),
    ] = None,
    max_timeout: Annotated[
        float | None,
        typer.Option(
            min=1,
            help="Most seconds a sandbox's timeout may be.",
            show_default=_shown("max_timeout"),
        ),
    ] = None,
    memory: options.Memory = None,
    allow_host: options.AllowHost = None,
    secret_header: options.SecretHeader = None,
    config: options.Config = None,
) -> None:
    """Serve E2B's sandbox API, so that the unmodified E2B SDK runs on sandcrew's sandboxes.

    Point the SDK at it with the lines it prints (E2B_API_URL, E2B_SANDBOX_URL,
    E2B_API_KEY). Each sandbox is a hardened session container with /home/user as its
    work folder and no network; Ctrl-C or SIGTERM stops the server and removes them all.
    --allow-host and --secret-header list the hosts a sandbox may be given (the SDK's
    network={"allow_out": [...]} picks among them; none unless it does).
    """
    settings = options.settings_from_options(
        config=config,
        sandbox=options.sandbox_flags(
            memory=memory, allow_hosts=allow_host, secret_headers=secret_header
        ),
        e2b={"max_sandboxes": max_sandboxes, "max_timeout": max_timeout},
    )
    from sandcrew.cli._terminal import log_to_stderr
    from sandcrew.e2b import serve

    log_to_stderr()
    key = api_key
    if key is None and settings.e2b.api_key is not None:
        key = settings.e2b.api_key.get_secret_value()
    try:
        asyncio.run(serve(settings, host=host, port=port, api_key=key, on_listening=_say))
    except KeyboardInterrupt:
        raise Interrupted(
            "the server stopped; its sandboxes were killed and their containers removed"
        ) from None


def _say(listening: Listening) -> None:
    """The lines a user exports, on stdout; where it listens, on stderr."""
    print(f"sandcrew e2b: listening on {listening.url}", file=sys.stderr, flush=True)
    for line in listening.exports():
        print(line, flush=True)


def _shown(name: str) -> str:
    """The ``[e2b]`` setting's default, as ``--help`` shows it."""
    return f"{E2bSettings.model_fields[name].default:g}"
