"""A strict chat template for the scripted server: the turn structure Gemma's and Mistral's
templates accept, refused the way real servers refuse it.

vLLM, TGI and llama.cpp (``--jinja``) render a request with the model's own chat template;
Gemma's and Mistral's raise "Conversation roles must alternate user/assistant/user/assistant/..."
unless, after an optional system message, user and assistant turns alternate starting with
user, and Gemma 2's raises "System role not supported". The servers answer with an HTTP error
carrying that text (vLLM 400, llama-cpp-python 500), or — as a llama.cpp server did — with an
empty reply.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

ROLES_MUST_ALTERNATE = "Conversation roles must alternate user/assistant/user/assistant/..."
SYSTEM_ROLE_NOT_SUPPORTED = "System role not supported"


@dataclass(frozen=True)
class StrictTemplate:
    """What a strict chat template accepts and how its server refuses the rest.

    ``system_role``: a system message may open the conversation (Gemma 3, Mistral) or not
    (Gemma 2). ``answer``: ``"error"`` (HTTP ``status`` with the template's message) or
    ``"empty"`` (HTTP 200 with an empty reply).
    """

    system_role: bool = True
    answer: Literal["error", "empty"] = "error"
    status: int = 400

    def objection(self, body: Mapping[str, Any]) -> str | None:
        """The template's error for this request, or None when it renders."""
        messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
        if messages and messages[0].get("role") == "system":
            if not self.system_role:
                return SYSTEM_ROLE_NOT_SUPPORTED
            messages = messages[1:]
        expected = ("user", "assistant")
        for index, message in enumerate(messages):
            if message.get("role") != expected[index % 2]:
                return ROLES_MUST_ALTERNATE
        return None
