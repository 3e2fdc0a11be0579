"""The one exception hierarchy of sandcrew.

Every error raised on purpose by the product derives from :class:`SandcrewError`.
Failures of the *user's code* (non-zero exit, timeout, out-of-memory) are never
exceptions: they are data in an execution result.
"""

from __future__ import annotations


class SandcrewError(Exception):
    """Root of every error sandcrew raises on purpose."""


class UserError(SandcrewError):
    """The API or the command line was used wrongly; the message says how to fix it."""


class ConfigurationError(UserError):
    """Settings are missing or contradictory (no model configured, bad limits, ...)."""


class ModelBehaviorError(SandcrewError):
    """A model answered with something the product cannot use, even after retries."""


class InfrastructureError(SandcrewError):
    """Something outside the user's code failed: Docker, the model endpoint, the network.

    ``code`` is a stable identifier for programs; ``retryable`` says whether trying
    the same call again later may succeed.
    """

    code: str = "infrastructure"
    retryable: bool = False

    def __init__(self, message: str, *, code: str | None = None, retryable: bool | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        if retryable is not None:
            self.retryable = retryable


__all__ = [
    "ConfigurationError",
    "InfrastructureError",
    "ModelBehaviorError",
    "SandcrewError",
    "UserError",
]
