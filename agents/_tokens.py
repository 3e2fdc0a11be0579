"""Token counts when the endpoint reports none, and the token budget every request respects.

Local servers often leave ``usage`` out of their answers, and a request that ends in an error
or is abandoned on a timeout reports nothing at all, yet the model read the prompt (and may
still be writing). Those tokens are estimated from the text: one token per
:data:`CHARS_PER_TOKEN` characters, plus :data:`TOKENS_PER_MESSAGE` for each message's
framing. The model's real tokenizer is unknown here (each model family has its own, and
exact ones need data that cannot be downloaded at run time), so the estimate errs on the
high side: English prose averages about four characters per token, code about three.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ..core import SandcrewError
from ._messages import Usage

CHARS_PER_TOKEN = 3
TOKENS_PER_MESSAGE = 4


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` (see the module doc for the rule)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimate_prompt_tokens(request: Mapping[str, Any]) -> int:
    """Tokens of a Chat Completions request's messages and tool definitions."""
    total = 0
    for message in request.get("messages") or []:
        total += TOKENS_PER_MESSAGE + estimate_tokens(json.dumps(message, ensure_ascii=False))
    if request.get("tools"):
        total += estimate_tokens(json.dumps(request["tools"], ensure_ascii=False))
    return total


def estimated_usage(prompt_tokens: int, completion_tokens: int) -> Usage:
    return Usage(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
        estimated=True,
    )


class TokenBudgetExhaustedError(SandcrewError):
    """No tokens are left for another request."""


class TokenMeter:
    """Tokens spent by every request of the agents that share it, against an optional limit.

    Each model agent caps a request's ``max_tokens`` at :attr:`remaining` and records what the
    request cost, replies that ended in an error or a timeout included.
    """

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.spent = Usage()

    @property
    def remaining(self) -> int | None:
        if self.limit is None:
            return None
        return max(self.limit - self.spent.total_tokens, 0)

    def record(self, usage: Usage | None) -> None:
        if usage is not None:
            self.spent = self.spent + usage

    def cap(self, max_tokens: int | None, *, prompt_tokens: int = 0, who: str) -> int | None:
        """``max_tokens`` no larger than what is left once the prompt (``prompt_tokens``,
        estimated) is paid for; fails when the request would not fit the budget at all."""
        remaining = self.remaining
        if remaining is None:
            return max_tokens
        room = remaining - prompt_tokens
        if room < 1:
            raise TokenBudgetExhaustedError(
                f"the token budget of {self.limit} is used up "
                f"({self.spent.total_tokens} spent, about {prompt_tokens} more needed for the "
                f"next request); {who} sent no further request"
            )
        return room if max_tokens is None else min(max_tokens, room)
