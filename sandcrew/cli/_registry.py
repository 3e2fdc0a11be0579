"""Which command modules make up the CLI (one line each)."""

from __future__ import annotations

from types import ModuleType

import typer


def _command_modules() -> list[ModuleType]:
    from sandcrew.cli import doctor, images, run, sandbox, solve, suite, transcript, version

    return [solve, run, suite, transcript, images, sandbox, doctor, version]


def register_all(app: typer.Typer) -> None:
    """Attach every command group to ``app``."""
    for module in _command_modules():
        module.register(app)
