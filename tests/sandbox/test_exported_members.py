from __future__ import annotations

import sandcrew.sandbox
from sandcrew.errors import InfrastructureError, UserError


def test_errors_belong_to_the_product_hierarchy() -> None:
    assert issubclass(sandcrew.sandbox.SandboxError, InfrastructureError)
    for infrastructure in ("DockerUnavailableError", "ImageNotFoundError"):
        assert issubclass(getattr(sandcrew.sandbox, infrastructure), sandcrew.sandbox.SandboxError)
    for infrastructure in ("SessionClosedError", "SessionFileError"):
        assert issubclass(getattr(sandcrew.sandbox, infrastructure), sandcrew.sandbox.SandboxError)
    for misuse in (
        "UnsupportedLanguageError",
        "CodeTooLargeError",
        "EmptyCodeError",
        "SessionLimitError",
    ):
        assert issubclass(getattr(sandcrew.sandbox, misuse), UserError)


def test_supported_languages() -> None:
    assert sandcrew.sandbox.SUPPORTED_LANGUAGES == ("python", "bash", "javascript")
    assert set(sandcrew.sandbox.DEFAULT_IMAGES) >= set(sandcrew.sandbox.SUPPORTED_LANGUAGES)


def test_the_docker_sandbox_implements_the_protocol() -> None:
    assert isinstance(sandcrew.sandbox.DockerSandbox(), sandcrew.sandbox.Sandbox)
    members = {"supported_languages", "start", "run", "aclose", "close"}
    assert members <= set(dir(sandcrew.sandbox.Sandbox))
