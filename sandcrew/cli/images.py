"""`sandcrew images build|list`."""

from __future__ import annotations

import re
import sys
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from sandcrew.cli import _options as options, _output
from sandcrew.errors import UserError
from sandcrew.sandbox.host import connect_docker
from sandcrew.sandbox.images import BaseSource, build_images, list_images

_STEP = re.compile(r"^\s*Step \d+/\d+ ")
"""Docker's build progress lines, e.g. ``Step 3/8 : RUN …``."""

images_app = typer.Typer(
    help="Build and list the sandbox images.", no_args_is_help=True, rich_markup_mode=None
)


@images_app.command("build")
def build(
    names: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="NAME",
            help="Images to build (python, node, python-data); default: python only.",
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
    tag: Annotated[
        str | None,
        typer.Option(help="Build the one named image under this tag instead of its own."),
    ] = None,
    install_deps: Annotated[
        bool,
        typer.Option(
            help="Install debootstrap with apt-get when the offline base needs it (as root)."
        ),
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Print every build line.")
    ] = False,
) -> None:
    """Build the sandbox images (offline-capable)."""
    if tag is not None and len(set(names or ())) != 1:
        raise UserError(
            "--tag needs exactly one image name, e.g. `sandcrew images build python --tag TAG`"
        )
    console = _output.console(stderr=True)
    on_terminal = _output.is_terminal(sys.stderr)
    client = connect_docker()
    with console.status("building sandbox images…") as status:

        def show(line: str) -> None:
            status.update(f"[bold]building:[/] {escape(line[:100])}")
            # In a log (no live status line) the Dockerfile steps say how far the build is.
            if verbose or (not on_terminal and _STEP.match(line)):
                console.print(line, highlight=False, markup=False)

        def decided(line: str) -> None:
            # Which base each image is built on, and why: said on a terminal and in a log.
            if not verbose:
                console.print(line, highlight=False, markup=False)

        tags = build_images(
            client,
            base=base,
            rebuild_base=rebuild_base,
            names=tuple(names) if names else None,
            tag=tag,
            install_deps=install_deps,
            on_progress=show,
            on_step=decided,
        )
    for tag in tags:
        console.print(f"[green]built[/] {tag}")


@images_app.command("list")
def list_(as_json: options.Json = False) -> None:
    """Show the sandbox images and whether they are built."""
    client = connect_docker()
    if as_json:
        _output.print_json({"images": _output.as_dicts(list_images(client))})
        return
    table = Table("image", "status", "size", "created", "Python packages")
    table.columns[0].no_wrap = True
    for image in list_images(client):
        size = f"{image.size_bytes / 1e6:.0f} MB" if image.size_bytes else ""
        status = "[green]built[/]" if image.present else f"[red]missing[/]: {image.build_command}"
        created = (image.created or "")[:16].replace("T", " ")
        table.add_row(image.tag, status, size, created, _packages(image.packages))
    _output.console().print(table)


def _packages(packages: tuple[str, ...] | None) -> str:
    """What the image's label says it adds to Python's standard library (blank: it does not say)."""
    if packages is None:
        return ""
    return ", ".join(packages) if packages else "standard library only"
