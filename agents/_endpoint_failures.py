"""Reading an endpoint's failures: what to retry, when, and what the server meant."""

from __future__ import annotations

import re
from typing import Any

import openai

NO_TOOLS_WORDS = re.compile(
    r"does not support tools|tools? (?:use |calling )?(?:is |are )?not supported|"
    r"does not support (?:function|tool) call",
    re.IGNORECASE,
)
"""How servers without tool support say so (Ollama: "... does not support tools")."""
_MAX_BACKOFF = 8.0
_MAX_RETRY_AFTER = 30.0


def never_sent(error: openai.APITimeoutError) -> bool:
    """A connect (or pool) timeout: the server never had the request."""
    # By name: the HTTP library under the openai client differs between its versions.
    return type(error.__cause__).__name__ in ("ConnectTimeout", "PoolTimeout")


def server_message(error: openai.APIStatusError) -> str:
    """What the server said, without the client's "Error code: 400 - " prefix."""
    body: Any = error.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return error.message


def worth_retrying(error: openai.APIStatusError) -> bool:
    advice = error.response.headers.get("x-should-retry")
    if advice in ("true", "false"):
        return advice == "true"
    return error.status_code in (408, 409, 429) or error.status_code >= 500


def backoff(attempt: int) -> float:
    return float(min(_MAX_BACKOFF, 0.5 * 2 ** (attempt - 1)))


def retry_after(error: openai.APIStatusError) -> float | None:
    headers = error.response.headers
    for header, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(header)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue
        if 0 <= seconds <= _MAX_RETRY_AFTER:
            return seconds
    return None


_CONTEXT_OVERFLOW_WORDS = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|exceeds? the (available )?context"
    r"|context (window|size) (is )?exceeded|too many tokens",
    re.IGNORECASE,
)


def is_context_overflow(error: openai.APIStatusError) -> bool:
    """OpenAI says ``context_length_exceeded``; vLLM, llama.cpp and others say it in words."""
    return error.code == "context_length_exceeded" or bool(
        _CONTEXT_OVERFLOW_WORDS.search(error.message)
    )


_SYSTEM_ROLE_REFUSED = re.compile(r"system role (?:is )?not supported", re.IGNORECASE)
_TURNS_REFUSED = re.compile(
    r"roles? must alternate|must alternate (?:between )?(?:user|assistant)"
    r"|conversation (?:roles|turns) must",
    re.IGNORECASE,
)


def refused_turns(message: str) -> str | None:
    """What a server's refusal of a conversation's turn structure objects to: ``"system"``
    (Gemma 2: "System role not supported"), ``"alternation"`` (Gemma, Mistral: "Conversation
    roles must alternate user/assistant/user/assistant/..."), or None for another error."""
    if _SYSTEM_ROLE_REFUSED.search(message):
        return "system"
    if _TURNS_REFUSED.search(message):
        return "alternation"
    return None
