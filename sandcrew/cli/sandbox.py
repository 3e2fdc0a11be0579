"""`sandcrew sandbox gc`: remove containers left behind by a crashed run."""

from __future__ import annotations

import typer
from rich.console import Console

from sandcrew.cli._docker import connect_docker
from sandcrew.sandbox import reap_orphans


def register(app: typer.Typer) -> None:
    sandbox_app = typer.Typer(help="Manage sandbox containers.", no_args_is_help=True)
    app.add_typer(sandbox_app, name="sandbox")

    @sandbox_app.command("gc")
    def gc() -> None:
        """Remove sandbox containers whose run is over or whose owner process died."""
        removed = reap_orphans(connect_docker())
        console = Console()
        if removed:
            console.print(f"removed {len(removed)} orphaned container(s):")
            for container_id in removed:
                console.print(f"  {container_id[:12]}", highlight=False)
        else:
            console.print("no orphaned sandbox containers")
