"""`sandcrew sandbox gc`: remove containers left behind by a crashed run."""

from __future__ import annotations

import typer

from sandcrew.sandbox.host import connect_docker, reap_orphans

sandbox_app = typer.Typer(
    help="Manage sandbox containers.", no_args_is_help=True, rich_markup_mode=None
)


@sandbox_app.command("gc")
def gc() -> None:
    """Remove sandbox containers whose run is over or whose owner process died."""
    removed = reap_orphans(connect_docker())
    if removed:
        typer.echo(f"removed {len(removed)} orphaned container(s):")
        for container_id in removed:
            typer.echo(f"  {container_id[:12]}")
    else:
        typer.echo("no orphaned sandbox containers")
