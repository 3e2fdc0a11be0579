"""Untrusted text on the user's terminal: control characters shown, never obeyed.

A program's output and a model's text can hold terminal control sequences: OSC 0
retitles the window, OSC 52 sets the clipboard, OSC 8 hides a link target,
``ESC [2J`` clears the screen and ``ESC [8m`` hides whatever follows, such as
the real status line. Where such text is written to a terminal, each C0
control character (except newline and tab), DEL and each C1 control character
is rendered as visible text: caret notation for C0 and DEL (``^[`` for ESC,
``^G`` for BEL, as ``cat -v`` and ``less`` show them) and ``<U+009B>`` for C1.
A carriage return directly before a newline is dropped (it moves nothing on a
terminal); a lone one is shown as ``^M``, since it could overwrite a line.

Output that is not a terminal (a pipe, a file) keeps the exact text, and so do
``--json``, reports and transcripts.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from sandcrew.cli._output import is_terminal

RESET_ATTRIBUTES = "\x1b[0m"
"""SGR 0: back to plain text, so that our own lines are never hidden or recoloured."""

_VISIBLE: dict[int, str] = {
    **{code: f"^{chr(code ^ 0x40)}" for code in range(0x20) if chr(code) not in "\n\t"},
    0x7F: "^?",
    **{code: f"<U+{code:04X}>" for code in range(0x80, 0xA0)},
}


def visible_controls(text: str) -> str:
    """``text`` with its control characters (except newline and tab) made visible."""
    return text.replace("\r\n", "\n").translate(_VISIBLE)


class UntrustedWriter:
    """Program output written piece by piece as it comes: visible on a terminal, exact elsewhere.

    A piece may end in the middle of a line, or between a carriage return and its
    newline (held back until the next piece tells). :meth:`end` ends an open line on
    a terminal, so that our own lines start at the margin.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._terminal = is_terminal(stream)
        self._held_return = False
        self._line_open = False

    def write(self, text: str) -> None:
        if self._terminal:
            if self._held_return:
                text = "\r" + text
            self._held_return = text.endswith("\r")
            text = visible_controls(text.removesuffix("\r") if self._held_return else text)
        if not text:
            return
        self._stream.write(text)
        self._stream.flush()
        self._line_open = not text.endswith("\n")

    def end(self) -> None:
        if not self._terminal:
            return
        tail = "^M" if self._held_return else ""
        self._held_return = False
        if tail or self._line_open:
            self._stream.write(tail + "\n")
            self._stream.flush()
        self._line_open = False


def write_untrusted(stream: TextIO, text: str) -> None:
    """Write program output: made visible on a terminal (ending with a newline), exact elsewhere."""
    writer = UntrustedWriter(stream)
    writer.write(text)
    writer.end()


def reset_attributes(stream: TextIO) -> None:
    """Reset the terminal's text attributes before a line of our own (nothing elsewhere)."""
    if is_terminal(stream):
        stream.write(RESET_ATTRIBUTES)
        stream.flush()


class VisibleControlsFormatter(logging.Formatter):
    """Log lines (which may quote a program's or a model's text) with visible controls."""

    def format(self, record: logging.LogRecord) -> str:
        return visible_controls(super().format(record))


def log_to_stderr(level: int = logging.WARNING) -> None:
    """Send sandcrew's log records to stderr, their control characters shown on a terminal."""
    handler = logging.StreamHandler(sys.stderr)
    if is_terminal(sys.stderr):
        handler.setFormatter(VisibleControlsFormatter("%(levelname)s %(name)s: %(message)s"))
    else:
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("sandcrew")
    logger.addHandler(handler)
    logger.setLevel(level)
