"""The ``sandcrew`` command line.

Each command group lives in its own module with a ``register(app)`` function;
this module only assembles them and turns sandcrew's own errors into one clear
sentence and exit code 2 instead of a traceback.
"""

from __future__ import annotations

import sys

import typer

from sandcrew.cli import _registry

app = typer.Typer(
    name="sandcrew",
    help="Write, review and safely run code with a crew of agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Write, review and safely run code with a crew of agents."""


_registry.register_all(app)


def main() -> None:
    """Console-script entry point."""
    from sandcrew.cli._errors import run_with_clean_errors
    from sandcrew.sandbox import treat_sigterm_as_interrupt

    # A SIGTERM removes the running containers, as Ctrl-C does.
    treat_sigterm_as_interrupt()
    sys.exit(run_with_clean_errors(app))


__all__ = ["app", "main"]
