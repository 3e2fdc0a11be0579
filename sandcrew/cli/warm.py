"""`sandcrew warm start|status|stop`: keep the command line's libraries imported in a warm
process, so that each command starts in a fork of it instead of importing them again."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Annotated

import typer

from sandcrew.cli import _handover
from sandcrew.errors import InfrastructureError, UserError

READY_SECONDS = 60.0
"""How long `warm start` waits for the new process to listen (it imports every command)."""

warm_app = typer.Typer(
    help="Keep a warm process that starts sandcrew's commands without importing anything.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@warm_app.command("start")
def start(
    idle_minutes: Annotated[
        float,
        typer.Option(min=0.1, help="End the warm process after this long without a command."),
    ] = 30.0,
) -> None:
    """Start this installation's warm process (nothing happens if one runs already)."""
    if not _handover.supported():
        raise UserError("a warm process needs Linux: it trusts a caller by SO_PEERCRED")
    running = _handover.ask("status")
    if running is not None:
        typer.echo(f"already warm: {running}")
        return
    folder = _handover.runtime_folder()
    os.makedirs(folder, mode=0o700, exist_ok=True)
    if not _handover.folder_is_private(folder):
        raise UserError(
            f"{folder} is not a folder of this user closed to others: "
            "remove it, or set XDG_RUNTIME_DIR to a private folder"
        )
    log_path = _handover.socket_path().removesuffix(".sock") + ".log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                # This interpreter's flags, which a caller's must match to be served.
                *subprocess._args_from_interpreter_flags(),  # type: ignore[attr-defined]
                # Not the folder it was started in on its path: a module there (a checkout's
                # typer.py) must not be imported in place of the library.
                "-P",
                "-m",
                "sandcrew.cli._warm_server",
                "--idle-minutes",
                str(idle_minutes),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
            cwd="/",
        )
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        status = _handover.ask("status")
        if status is not None:
            typer.echo(f"warm: {status}")
            return
        if process.poll() is not None:
            break
        time.sleep(0.05)
    else:
        process.kill()
    raise InfrastructureError(
        f"the warm process did not start (its log: {log_path}): "
        f"{_last_line(log_path) or 'it said nothing'}"
    )


@warm_app.command("status")
def status() -> None:
    """Say whether this installation's warm process runs (exit code 1 when it does not)."""
    running = _handover.ask("status")
    if running is None:
        typer.echo("not warm: each command starts its own process")
        raise typer.Exit(1)
    typer.echo(f"warm: {running}")


@warm_app.command("stop")
def stop() -> None:
    """End this installation's warm process (commands it is running go on to their end)."""
    stopped = _handover.ask("stop")
    if stopped is None:
        typer.echo("not warm: nothing to stop")
        return
    typer.echo(f"stopped: {stopped}")


def _last_line(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as log:
            lines = [line.strip() for line in log if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""
