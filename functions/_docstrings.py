"""Descriptions from docstrings.

Parsing is delegated to ``docstring_parser``: it is small, pure Python, dependency-free,
typed, and reads the three styles people actually write (Google, NumPy, Sphinx/ReST) with
automatic detection, keeping multi-line and multi-paragraph descriptions whole. ``griffe``
reads the same styles but is a full API-documentation loader, far more than we need here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import docstring_parser


@dataclass(frozen=True)
class DocstringInfo:
    """The parts of a docstring a function contract uses."""

    description: str = ""
    parameters: dict[str, str] = field(default_factory=dict)
    returns: str | None = None


def read_docstring(fn: Callable[..., Any]) -> DocstringInfo:
    """Split ``fn``'s docstring into its description, per-parameter texts and return text.

    The description is the summary plus the extended text, without the sections.
    Raises ``ValueError`` when the docstring cannot be parsed.
    """
    text = inspect.getdoc(fn)
    if not text:
        return DocstringInfo()
    try:
        parsed = docstring_parser.parse(text)
    except docstring_parser.ParseError as error:
        raise ValueError(f"its docstring cannot be parsed: {error}") from error
    parts = [part.strip() for part in (parsed.short_description, parsed.long_description) if part]
    parameters = {
        param.arg_name: param.description.strip()
        for param in parsed.params
        if param.args[0] != "attribute" and param.description and param.description.strip()
    }
    returns = (
        parsed.returns.description.strip()
        if parsed.returns and parsed.returns.description
        else None
    )
    return DocstringInfo(
        description="\n\n".join(parts), parameters=parameters, returns=returns or None
    )
