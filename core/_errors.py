"""The one exception hierarchy of sandcrew.

Every error raised on purpose by the product derives from :class:`SandcrewError`.
Failures of the *user's code* (non-zero exit, timeout, out-of-memory) are never
exceptions: they are data in an execution result.
"""

from __future__ import annotations

import enum


class ErrorCode(enum.StrEnum):
    """Stable identifiers of infrastructure failures, for programs that react to them."""

    INFRASTRUCTURE = "infrastructure"
    SANDBOX = "sandbox"
    DOCKER_UNAVAILABLE = "docker_unavailable"
    IMAGE_NOT_FOUND = "image_not_found"
    IMAGE_BUILD_FAILED = "image_build_failed"
    MODEL_UNREACHABLE = "model_unreachable"
    MODEL_ERROR = "model_error"
    MODEL_REJECTED = "model_rejected"
    MODEL_CONTEXT_EXCEEDED = "model_context_exceeded"
    CLUSTER_UNREACHABLE = "cluster_unreachable"


class SandcrewError(Exception):
    """Root of every error sandcrew raises on purpose."""


class UserError(SandcrewError):
    """The API or the command line was used wrongly; the message says how to fix it."""


class ConfigurationError(UserError):
    """Settings are missing or contradictory (no model configured, bad limits, ...)."""


class InvalidSettings(ConfigurationError):
    """Settings that fail validation; ``problems`` holds (dotted field name, why) pairs."""

    def __init__(self, title: str, problems: list[tuple[str, str]]) -> None:
        self.title = title
        self.problems = problems
        # A reason that already names its field ("timeout must be > 0") is not prefixed again.
        listed = "; ".join(
            why if not name or why.startswith(name) else f"{name}: {why}" for name, why in problems
        )
        super().__init__(f"invalid {title}: {listed}")


class ModelBehaviorError(SandcrewError):
    """A model answered with something the product cannot use, even after retries."""


class InfrastructureError(SandcrewError):
    """Something outside the user's code failed: Docker, the model endpoint, the network.

    ``code`` is a stable identifier for programs; ``retryable`` says whether trying
    the same call again later may succeed.
    """

    code: ErrorCode = ErrorCode.INFRASTRUCTURE
    retryable: bool = False

    def __init__(
        self, message: str, *, code: ErrorCode | None = None, retryable: bool | None = None
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        if retryable is not None:
            self.retryable = retryable
