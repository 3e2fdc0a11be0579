"""The registry of named personas: scripts that replay how real models and servers answer.

``PERSONAS`` maps a name to a function returning the persona's turns; :func:`persona_turns`
looks one up with a clear error for an unknown name.
"""

from __future__ import annotations

from collections.abc import Callable

from sandcrew.testing._endpoint_personas import ENDPOINT_PERSONAS
from sandcrew.testing._script import Turn

PERSONAS: dict[str, Callable[[], list[Turn]]] = {**ENDPOINT_PERSONAS}


def persona_turns(name: str) -> list[Turn]:
    """The script of persona ``name``."""
    try:
        make = PERSONAS[name]
    except KeyError:
        known = ", ".join(sorted(PERSONAS))
        raise ValueError(f"unknown persona {name!r}; known personas: {known}") from None
    return make()
