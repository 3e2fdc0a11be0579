"""Languages the sandbox runs: their names, aliases and how each program is started."""

from __future__ import annotations

from dataclasses import dataclass

_ALIASES: dict[str, str] = {
    "py": "python",
    "py3": "python",
    "python": "python",
    "python3": "python",
    "sh": "bash",
    "shell": "bash",
    "bash": "bash",
    "js": "javascript",
    "javascript": "javascript",
    "node": "javascript",
    "nodejs": "javascript",
}


@dataclass(frozen=True)
class LanguageRunner:
    """Where a program is written inside the container, which interpreter runs it, and how."""

    filename: str
    interpreter: tuple[str, ...]
    environment: tuple[tuple[str, str], ...] = ()
    """Variables set for this language only (the container's environment is otherwise empty)."""


RUNNERS: dict[str, LanguageRunner] = {
    "python": LanguageRunner(
        filename="main.py",
        interpreter=("python3",),
        environment=(("PYTHONUNBUFFERED", "1"), ("PYTHONDONTWRITEBYTECODE", "1")),
    ),
    "bash": LanguageRunner(filename="main.sh", interpreter=("bash",)),
    "javascript": LanguageRunner(filename="main.js", interpreter=("node",)),
}

SUPPORTED_LANGUAGES: tuple[str, ...] = tuple(RUNNERS)


def normalize_language(tag: str | None) -> str | None:
    """Map a code-fence tag to a language name.

    ``py``/``python3``/``python`` become ``"python"``, ``sh``/``shell``/``bash``
    become ``"bash"``, any other tag is lowercased as is; an empty or missing tag
    gives ``None``.
    """
    if tag is None:
        return None
    cleaned = tag.strip().lower()
    if not cleaned:
        return None
    return _ALIASES.get(cleaned, cleaned)
