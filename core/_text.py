"""Text helpers shared by the sandbox and the agents (no dependencies of their own)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_MARKER_ROOM = 40
"""Characters reserved for the ``… [N characters trimmed] …`` marker."""


def trim_middle(text: str, max_chars: int) -> str:
    """``text`` if it fits in about ``max_chars``, else its head and tail around a marker.

    The tail gets the larger share: errors, tracebacks and final results come last.
    """
    if len(text) <= max_chars:
        return text
    keep = max(max_chars - _MARKER_ROOM, 2)
    head = keep * 2 // 5
    tail = keep - head
    trimmed = len(text) - head - tail
    return f"{text[:head]}\n… [{trimmed} characters trimmed] …\n{text[len(text) - tail :]}"


def describe_invalid_value(problem: Mapping[str, Any]) -> str:
    """One validation problem (an item of pydantic's ``errors()``) as ``field: why (got …)``."""
    location = ".".join(str(part) for part in problem.get("loc", ()))
    message = str(problem.get("msg", "invalid value")).removeprefix("Value error, ")
    # A message that already names its field ("timeout must be > 0") is not prefixed again.
    shown = f"{location}: {message}" if location and not message.startswith(location) else message
    if "(got " in message:
        return shown
    return f"{shown} (got {problem.get('input')!r})"


def summarize_problem(problem: Mapping[str, Any], *, whole: str) -> str:
    """``field: why`` of one of pydantic's ``errors()`` (``whole`` when it is the root's)."""
    location = ".".join(str(part) for part in problem.get("loc", ()))
    return f"{location or whole}: {problem.get('msg')}"


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``1 task``, ``2 tasks``: the noun agrees with the number (``plural`` when not ``+s``)."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def environment_problem(variables: Mapping[str, str]) -> str | None:
    """What makes ``variables`` unfit as a process's environment, or None.

    A name must be non-empty and hold neither ``=`` nor NUL; a value must hold no NUL:
    the kernel's ``NAME=value`` strings cannot carry them.
    """
    for name, value in variables.items():
        if not name or "=" in name or "\0" in name:
            return (
                "an environment variable's name must be non-empty, without '=' or NUL "
                f"(got {name!r})"
            )
        if "\0" in value:
            return f"the value of the environment variable {name} holds a NUL character"
    return None
