"""Languages the sandbox runs: their names, aliases and how each program is started."""

from __future__ import annotations

from ._inside.runners import RUNNERS, LanguageRunner

__all__ = ["RUNNERS", "SUPPORTED_LANGUAGES", "LanguageRunner", "normalize_language"]

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


SUPPORTED_LANGUAGES: tuple[str, ...] = tuple(RUNNERS)
OPTIONAL_LANGUAGES = frozenset({"javascript"})
"""Languages whose default image is built only on request (``sandcrew images build node``)."""


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
