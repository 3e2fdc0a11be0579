"""`sandcrew transcript FILE --html OUT`: a solve transcript as a readable page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from sandcrew.cli import _output
from sandcrew.errors import UserError


def transcript(
    source: Annotated[
        Path, typer.Argument(metavar="FILE", help="A transcript from `solve --transcript`.")
    ],
    html: Annotated[Path, typer.Option(help="Write the self-contained HTML page here.")],
) -> None:
    """Render a solve transcript as a self-contained HTML page."""
    from sandcrew.transcript import read_transcript
    from sandcrew.transcript_page import saved_artifact_bytes, write_transcript_page

    if not html.parent.is_dir():
        raise UserError(f"--html {html}: the folder {html.parent} does not exist")
    events = read_transcript(source)
    # The images among the files that `solve --out` saved are shown on the page.
    write_transcript_page(events, html, artifact_bytes=saved_artifact_bytes(events))
    _output.console(stderr=True, highlight=False).print(f"wrote {escape(str(html))}")
