"""`sandcrew images build|list`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from sandcrew.cli._docker import connect_docker
from sandcrew.sandbox import BaseSource, build_images, list_images


def register(app: typer.Typer) -> None:
    images_app = typer.Typer(help="Build and list the sandbox images.", no_args_is_help=True)
    app.add_typer(images_app, name="images")

    @images_app.command("build")
    def build(
        names: Annotated[
            list[str] | None,
            typer.Argument(
                help="Images to build (python, node); default: python only.",
                show_default=False,
            ),
        ] = None,
        base: Annotated[
            BaseSource,
            typer.Option(
                help="Where the base layer comes from: the public image if reachable (auto), "
                "always the public image, or a Debian root fs made with debootstrap.",
            ),
        ] = BaseSource.AUTO,
        rebuild_base: Annotated[
            bool, typer.Option(help="Make the debootstrap base again even if it exists.")
        ] = False,
        verbose: Annotated[
            bool, typer.Option("--verbose", "-v", help="Print every build line.")
        ] = False,
    ) -> None:
        """Build the sandbox images (offline-capable)."""
        console = Console(stderr=True)
        client = connect_docker()
        with console.status("building sandbox images…") as status:

            def show(line: str) -> None:
                status.update(f"[bold]building:[/] {line[:100]}")
                if verbose:
                    console.print(line, highlight=False, markup=False)

            tags = build_images(
                client,
                base=base,
                rebuild_base=rebuild_base,
                names=tuple(names) if names else None,
                on_progress=show,
            )
        for tag in tags:
            console.print(f"[green]built[/] {tag}")

    @images_app.command("list")
    def list_() -> None:
        """Show the sandbox images and whether they are built."""
        client = connect_docker()
        table = Table("image", "status", "size", "created")
        table.columns[0].no_wrap = True
        for image in list_images(client):
            size = f"{image.size_bytes / 1e6:.0f} MB" if image.size_bytes else ""
            status = (
                "[green]built[/]" if image.present else f"[red]missing[/]: {image.build_command}"
            )
            created = (image.created or "")[:16].replace("T", " ")
            table.add_row(image.tag, status, size, created)
        Console().print(table)
