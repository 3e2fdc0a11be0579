from __future__ import annotations

import sandcrew.errors
import sandcrew.sandbox
from sandcrew.errors import InfrastructureError, UserError
from sandcrew.sandbox.code import SUPPORTED_LANGUAGES
from sandcrew.sandbox.images import DEFAULT_IMAGES


def test_errors_belong_to_the_product_hierarchy() -> None:
    errors = sandcrew.errors
    assert issubclass(sandcrew.sandbox.SandboxError, InfrastructureError)
    for infrastructure in (
        "DockerUnavailableError",
        "ImageNotFoundError",
        "SessionLostError",
        "SessionTimeoutError",
        "BatchContainerLost",
    ):
        assert issubclass(getattr(errors, infrastructure), sandcrew.sandbox.SandboxError)
    for misuse in (
        "UnsupportedLanguageError",
        "CodeTooLargeError",
        "EmptyCodeError",
        "SessionLimitError",
        "SessionFileError",
        "SessionFileNotFoundError",
    ):
        assert issubclass(getattr(errors, misuse), UserError)


def test_a_session_ends_on_its_own_without_an_infrastructure_fault() -> None:
    ended = sandcrew.sandbox.SessionClosedError
    assert issubclass(sandcrew.errors.SessionExpiredError, ended)
    assert not issubclass(sandcrew.errors.SessionExpiredError, InfrastructureError)
    assert issubclass(sandcrew.errors.SessionLostError, ended)
    assert not issubclass(ended, InfrastructureError)


def test_docker_sessions_satisfy_the_session_protocols() -> None:
    sandbox = sandcrew.sandbox.DockerSandbox()
    assert isinstance(sandbox, sandcrew.sandbox.SupportsSessions)
    assert isinstance(sandbox.session(), sandcrew.sandbox.Session)


def test_supported_languages() -> None:
    assert SUPPORTED_LANGUAGES == ("python", "bash", "javascript")
    assert set(DEFAULT_IMAGES) >= set(SUPPORTED_LANGUAGES)


def test_the_docker_sandbox_implements_the_protocol() -> None:
    assert isinstance(sandcrew.sandbox.DockerSandbox(), sandcrew.sandbox.Sandbox)
    members = {"supported_languages", "start", "run", "aclose", "close"}
    assert members <= set(dir(sandcrew.sandbox.Sandbox))
