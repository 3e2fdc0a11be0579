"""Turn sandcrew errors into one readable line and a stable exit code."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape

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
        Console(stderr=True).print(f"[bold red]error:[/] {escape(str(error))}", highlight=False)
        return USAGE_ERROR_EXIT
    return 0
