"""Consoles that suit both a terminal and a pipe (CI logs, files, other programs).

On a terminal rich wraps to the window. Piped, a hard wrap at rich's fallback of 80
columns would split errors and table rows mid-line, so lines are never wrapped there.

Every line sandcrew prints through rich comes from :func:`console`, and on a terminal
that console shows the control characters of whatever it prints (a file name from a
program, a model's text, a note) instead of letting the terminal obey them: the one
place where the terminal-safety filter of :mod:`sandcrew.cli._terminal` meets rich.
Rich's own styling travels outside the text, so it is untouched.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.console import Console

PIPED_WIDTH = 200
"""Width tables and panels get when not on a terminal (COLUMNS overrides it)."""


def is_terminal(stream: TextIO | None) -> bool:
    """Whether ``stream`` is an open terminal (false for pipes, files and closed streams)."""
    if stream is None:
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def console(*, stderr: bool = False, highlight: bool = True) -> Console:
    """A console for stdout (or stderr) that does not hard-wrap when piped.

    ``highlight``: rich's colouring of numbers and the like, on a terminal only.
    """
    from rich.console import Console  # only commands that print through rich pay for it

    stream = sys.stderr if stderr else sys.stdout
    if is_terminal(stream):
        from sandcrew.cli._shown_controls import ShowControls

        shown = Console(stderr=stderr, highlight=highlight)
        shown.push_render_hook(ShowControls())
        return shown
    width = int(os.environ.get("COLUMNS", "0") or 0) or PIPED_WIDTH
    return Console(stderr=stderr, width=width, soft_wrap=True, highlight=False)


JSON_FORMAT = 1
"""The ``format`` of every JSON document the CLI prints; bumped only on incompatible changes."""


# JSON escapes C0 control characters itself; DEL and the C1 controls it leaves raw, and
# U+009B is CSI on many terminals. As \u escapes they mean the same string.
_ESCAPED_IN_JSON = {code: f"\\u{code:04x}" for code in range(0x7F, 0xA0)}


def json_text(document: Any, *, indent: int | None = None) -> str:
    """``document`` as JSON: other languages' text kept as it is, no control character raw."""
    return json.dumps(document, indent=indent, ensure_ascii=False).translate(_ESCAPED_IN_JSON)


def print_json(document: dict[str, Any]) -> None:
    """Print ``document`` with its ``format`` version first."""
    print(json_text({"format": JSON_FORMAT, **document}, indent=2))


def as_dicts(items: list[Any]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(item) for item in items]
