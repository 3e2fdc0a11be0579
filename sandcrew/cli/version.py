"""`sandcrew version` (also `sandcrew --version`)."""

from __future__ import annotations

import typer

import sandcrew


def version() -> None:
    """Print the installed sandcrew version."""
    typer.echo(sandcrew.__version__)
