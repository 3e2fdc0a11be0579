"""The rich render hook that makes every terminal console show control characters, not obey them.

Imported only by :func:`sandcrew.cli._output.console` when it prints to a terminal.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderHook, RenderResult
from rich.segment import Segment

from sandcrew.cli._terminal import visible_controls


class ShowControls(RenderHook):
    """The text of every line rendered shows its control characters (``^[``, ``<U+009B>``).

    Rich keeps its own escape codes apart from the text (styles, and segments marked
    as control, such as a live status line's cursor moves), so only the text changes.
    """

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Shown(renderable) for renderable in renderables]


class _Shown:
    def __init__(self, renderable: ConsoleRenderable) -> None:
        self._renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        return _shown_segments(console.render(self._renderable, options))


def _shown_segments(segments: Iterable[Segment]) -> Iterator[Segment]:
    for segment in segments:
        if segment.control:
            yield segment
        else:
            yield Segment(visible_controls(segment.text), segment.style)
