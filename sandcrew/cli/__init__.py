"""The ``sandcrew`` command line.

Each command is a module-level function in its own module; :mod:`._registry` lists them
and imports only the one that runs,
:mod:`._options` maps options to settings, :mod:`._exit_codes` holds the exit-code table,
and :mod:`._errors` turns every failure into one line and one code of that table.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Annotated

import typer

import sandcrew
from sandcrew.cli import _output
from sandcrew.cli._registry import CommandGroup

app = typer.Typer(
    name="sandcrew",
    cls=CommandGroup,
    help="Write, review and safely run code with a crew of agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # Plain help: no boxes or <bool> metavars, and the same text in a terminal and a log.
    rich_markup_mode=None,
    context_settings={
        "help_option_names": ["-h", "--help"],
        # Help fills a wide terminal, and is not wrapped at 80 columns in a pipe or a log.
        "max_content_width": _output.PIPED_WIDTH,
        "terminal_width": None if _output.is_terminal(sys.stdout) else _output.PIPED_WIDTH,
    },
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(sandcrew.__version__)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the installed version and exit.",
        ),
    ] = False,
) -> None:
    """Write, review and safely run code with a crew of agents."""


def main() -> None:
    """Console-script entry point."""
    # Start-up makes many objects that live as long as the process (modules, classes,
    # pydantic's schemas): the cyclic collector would scan them again and again and free
    # nothing (a tenth of `sandcrew run`'s CPU time). It is paused until the command is
    # loaded, then resumes with them frozen out of its way (see _registry.load_command).
    gc.disable()
    # Pydantic looks for plugins in the entry points of every installed distribution when
    # it builds its first model: ~80 ms of each command here, for plugins that only observe
    # validation. The command line runs without them unless the variable says otherwise.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from sandcrew.cli._errors import run_with_clean_errors
    from sandcrew.sandbox.host import treat_sigterm_as_interrupt

    # A SIGTERM removes the running containers, as Ctrl-C does.
    treat_sigterm_as_interrupt()
    sys.exit(run_with_clean_errors(app))


__all__ = ["app", "main"]
