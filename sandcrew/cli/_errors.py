"""Turn sandcrew errors into one readable line and a stable exit code."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape

from sandcrew.cli._terminal import visible_controls
from sandcrew.errors import SandcrewError

USAGE_ERROR_EXIT = 2


def run_with_clean_errors(app: typer.Typer) -> int:
    """Run the typer app; a :class:`SandcrewError` becomes ``error: …`` and exit 2.

    Usage errors, ``--help`` and explicit exits are handled by typer itself and
    leave through ``SystemExit`` with their own code.
    """
    try:
        app()
    except SandcrewError as error:
        # A message may quote a model's or a program's text: shown, never obeyed.
        message = escape(visible_controls(str(error)))
        Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False)
        return USAGE_ERROR_EXIT
    return 0
