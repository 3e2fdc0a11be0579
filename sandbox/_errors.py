"""Errors of the sandbox: infrastructure failures and misuse of the API.

Failures of the user's code (non-zero exit, timeout, out-of-memory) are never
errors: they are data in :class:`~sandcrew.sandbox.ExecutionResult`.
"""

from __future__ import annotations

from ..core import ErrorCode, InfrastructureError, SandcrewError, UserError
from ._images import missing_image_advice

BUILD_IMAGES_COMMAND = "sandcrew images build"


class SandboxError(InfrastructureError):
    """The sandbox infrastructure (Docker, the container) failed, not the user's code."""

    code = ErrorCode.SANDBOX


class DockerUnavailableError(SandboxError):
    """The Docker engine cannot be reached; the message names DOCKER_HOST and the endpoint."""

    code = ErrorCode.DOCKER_UNAVAILABLE
    retryable = True

    def __init__(self, endpoint: str, reason: str) -> None:
        super().__init__(
            f"Cannot reach the Docker engine at {endpoint} "
            f"(set DOCKER_HOST or start Docker): {reason}"
        )
        self.endpoint = endpoint
        self.reason = reason


class ImageNotFoundError(SandboxError):
    """The sandbox image for a language has not been built on this engine."""

    code = ErrorCode.IMAGE_NOT_FOUND

    def __init__(self, image: str) -> None:
        super().__init__(f"Sandbox image {image} is missing; {missing_image_advice(image)}")
        self.image = image


class UnsupportedLanguageError(UserError):
    """Code was handed over in a language the sandbox cannot run."""

    def __init__(self, language: str, supported: tuple[str, ...]) -> None:
        listed = ", ".join(supported) if supported else "none"
        super().__init__(f"The sandbox cannot run {language!r} code; supported languages: {listed}")
        self.language = language
        self.supported = supported


class CodeTooLargeError(UserError):
    """The code is larger than ``SandboxConfig.max_code_bytes``."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"The code is {size} bytes; the sandbox accepts at most {limit} bytes "
            "(raise SandboxConfig.max_code_bytes to allow more)"
        )
        self.size = size
        self.limit = limit


def code_not_text(code: str, error: UnicodeEncodeError) -> UserError:
    """The refusal of code that holds a lone surrogate (a character without a UTF-8 form)."""
    return UserError(
        f"The code is not valid text: the character at position {error.start} "
        f"({code[error.start]!r}) is a lone surrogate, which has no UTF-8 form; "
        "remove it or decode the source with errors='replace'"
    )


class EmptyCodeError(UserError):
    """There is no code to run (empty or only whitespace)."""

    def __init__(self) -> None:
        super().__init__("There is no code to run: the code is empty or only whitespace")


class SessionClosedError(SandcrewError):
    """The session has ended (closed, expired, or its container lost); start a new one.

    Raised as is when a closed session is used; its subclasses say why a session
    ended on its own.
    """


class SessionExpiredError(SessionClosedError):
    """The session reached its idle timeout or its lifetime: an end it was set up for."""


class SessionLostError(SessionClosedError, SandboxError):
    """The session's container or supervisor failed (the interpreter could not start, the
    container was removed or stopped answering): an infrastructure fault."""


class SessionTimeoutError(SandboxError):
    """The session's supervisor did not answer a request in time (start, restart, a file)."""

    retryable = True


class SessionLimitError(UserError):
    """This process already holds as many sessions as its limit allows."""


class SessionFileError(UserError):
    """A file request was refused inside the session (a link, too large, not a file...)."""


class SessionFileNotFoundError(SessionFileError):
    """The file or folder a request named does not exist in the session."""
