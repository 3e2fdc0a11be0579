"""The ``sandcrew`` typer application, and running one command in this process."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

import sandcrew
from sandcrew.cli import _output
from sandcrew.cli._registry import CommandGroup


def _print_version(value: bool) -> None:
    if value:
        typer.echo(sandcrew.__version__)
        raise typer.Exit()


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


def build_app() -> typer.Typer:
    """The application, for the streams this process has now (a warm start's command has
    other streams than the process that imported this module)."""
    application = typer.Typer(
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
    application.callback()(_root)
    return application


app = build_app()


def run_here(application: typer.Typer = app) -> int:
    """Run the command of ``sys.argv`` in this process; its exit code."""
    from sandcrew.cli._errors import run_with_clean_errors
    from sandcrew.sandbox.host import treat_sigterm_as_interrupt

    # A SIGTERM removes the running containers, as Ctrl-C does.
    treat_sigterm_as_interrupt()
    return run_with_clean_errors(application)


__all__ = ["app", "build_app", "run_here"]
