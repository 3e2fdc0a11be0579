"""Which commands make up the CLI (one line each); each is a module-level function."""

from __future__ import annotations

import typer


def register_all(app: typer.Typer) -> None:
    """Attach every command and command group to ``app``."""
    from sandcrew.cli import (
        doctor,
        images,
        mcp_server,
        run,
        sandbox,
        solve,
        suite,
        transcript,
        version,
    )

    app.command()(solve.solve)
    app.command()(run.run)
    app.add_typer(suite.suite_app, name="suite")
    app.command()(transcript.transcript)
    app.add_typer(images.images_app, name="images")
    app.add_typer(sandbox.sandbox_app, name="sandbox")
    app.command()(doctor.doctor)
    app.command("mcp")(mcp_server.mcp)
    app.command()(version.version)
