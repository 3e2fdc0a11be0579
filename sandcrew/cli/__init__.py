"""The ``sandcrew`` command line.

Each command is a module-level function in its own module; :mod:`._registry` lists them
and imports only the one that runs,
:mod:`._options` maps options to settings, :mod:`._exit_codes` holds the exit-code table,
and :mod:`._errors` turns every failure into one line and one code of that table.
:mod:`._app` holds the typer application. When ``sandcrew warm start`` has started a
warm process for this installation, :mod:`._handover` gives it the command instead
(:mod:`._warm_server`); this module imports nothing else, so that costs no library.
"""

from __future__ import annotations

import gc
import os
import sys
import typing

if typing.TYPE_CHECKING:
    import typer


def main() -> None:
    """Console-script entry point."""
    from sandcrew.cli._handover import hand_over

    served = hand_over(sys.argv[1:])
    if served is not None:
        sys.exit(served)
    # Start-up makes many objects that live as long as the process (modules, classes,
    # pydantic's schemas): the cyclic collector would scan them again and again and free
    # nothing (a tenth of `sandcrew run`'s CPU time). It is paused until the command is
    # loaded, then resumes with them frozen out of its way (see _registry.load_command).
    gc.disable()
    prepare_environment()
    from sandcrew.cli._app import run_here

    sys.exit(run_here())


def prepare_environment() -> None:
    """What the environment of a process that runs commands holds before it imports them."""
    # Pydantic looks for plugins in the entry points of every installed distribution when
    # it builds its first model: ~80 ms of each command here, for plugins that only observe
    # validation. The command line runs without them unless the variable says otherwise.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def __getattr__(name: str) -> typer.Typer:
    # `app` is built on first use: the entry point must not import typer before it knows
    # whether a warm process takes the command.
    if name == "app":
        from sandcrew.cli._app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["app", "main", "prepare_environment"]
