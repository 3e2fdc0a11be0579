"""Which command modules make up the CLI (one line each)."""

from __future__ import annotations

from types import ModuleType

import typer


def _command_modules() -> list[ModuleType]:
    # Imported here, not at module level: each command module imports its own
    # heavy dependencies, and `sandcrew --help` should not pay for all of them twice.
    from sandcrew.cli import version

    return [version]


def register_all(app: typer.Typer) -> None:
    """Attach every command group to ``app``."""
    for module in _command_modules():
        module.register(app)
