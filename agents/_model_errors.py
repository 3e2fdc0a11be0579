"""What a failed model request raises, and the tokens it cost."""

from __future__ import annotations

from collections.abc import Sequence

from ..core import ErrorCode, InfrastructureError, ModelBehaviorError
from ._messages import Usage


class ModelReplyError(ModelBehaviorError):
    """A reply the product cannot use; ``usage`` is what it cost, ``notes`` what was tried."""

    def __init__(
        self, message: str, *, usage: Usage | None = None, notes: Sequence[str] = ()
    ) -> None:
        super().__init__(message)
        self.usage = usage
        self.notes = list(notes)


class EmptyReplyError(ModelReplyError):
    """The model answered with no text and no call."""


class TruncatedReplyError(ModelReplyError):
    """The model's reply was cut off at its length limit, even when asked to be shorter."""


class ToolsUnsupportedError(ModelReplyError):
    """The endpoint accepts no request that offers tools (for this model)."""


class EndpointTimeoutError(InfrastructureError):
    """The endpoint had the request but did not answer in time; it was not sent again.
    ``usage`` estimates what the abandoned request cost (the prompt and ``max_tokens``)."""

    def __init__(self, message: str, *, usage: Usage) -> None:
        super().__init__(message, code=ErrorCode.MODEL_UNREACHABLE, retryable=True)
        self.usage = usage


def spent_usage(error: BaseException) -> Usage | None:
    """The tokens a failed model request cost, when the error knows them."""
    usage = getattr(error, "usage", None)
    return usage if isinstance(usage, Usage) else None
