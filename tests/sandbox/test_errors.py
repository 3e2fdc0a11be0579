"""Misuse and an unreachable engine fail early with one clear sentence each."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from sandcrew.errors import (
    CodeTooLargeError,
    DockerUnavailableError,
    EmptyCodeError,
    ImageNotFoundError,
    UnsupportedLanguageError,
    UserError,
)
from sandcrew.sandbox import DockerSandbox, SandboxConfig
from sandcrew.sandbox.host import docker_endpoint

# None of these reach Docker: the checks come before any connection.


@pytest.mark.parametrize("code", ["", "   \n\t\n"], ids=["empty", "blank"])
async def test_empty_code(code: str) -> None:
    with pytest.raises(EmptyCodeError, match="no code to run"):
        await DockerSandbox().run(code)


async def test_unsupported_language_lists_the_supported_ones() -> None:
    with pytest.raises(UnsupportedLanguageError) as caught:
        await DockerSandbox().run("puts 1", "ruby")
    assert str(caught.value) == (
        "The sandbox cannot run 'ruby' code; supported languages: python, bash, javascript"
    )


def test_a_missing_optional_image_names_its_build_command() -> None:
    assert str(ImageNotFoundError("sandcrew/node:latest")) == (
        "Sandbox image sandcrew/node:latest is missing; build it with `sandcrew images build node`"
    )
    assert str(ImageNotFoundError("sandcrew/python:latest")).endswith(
        "build it with `sandcrew images build`"
    )


async def test_language_without_an_image_is_unsupported() -> None:
    sandbox = DockerSandbox(SandboxConfig(images={"python": "sandcrew/python:latest"}))
    with pytest.raises(UnsupportedLanguageError, match=r"supported languages: python$"):
        await sandbox.run("echo hi", "bash")


async def test_oversized_code_names_the_limit() -> None:
    sandbox = DockerSandbox(SandboxConfig(max_code_bytes=1000))
    with pytest.raises(CodeTooLargeError) as caught:
        await sandbox.run("#" * 1001)
    assert "1001 bytes" in str(caught.value)
    assert "at most 1000 bytes" in str(caught.value)
    assert "max_code_bytes" in str(caught.value)


async def test_a_lone_surrogate_names_its_position() -> None:
    with pytest.raises(UserError) as caught:
        await DockerSandbox().run("print('\ud800')")
    assert "position 7" in str(caught.value)
    assert "'\\ud800'" in str(caught.value)
    assert "lone surrogate" in str(caught.value)


def test_constructor_does_not_connect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent.sock")
    sandbox = DockerSandbox()
    # Nothing connected: the client is not available until start().
    with pytest.raises(UserError, match="not started"):
        _ = sandbox.client
    sandbox.close()


async def test_unreachable_docker_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent.sock")
    sandbox = DockerSandbox()
    with pytest.raises(DockerUnavailableError) as caught:
        await sandbox.run("print(1)")
    message = str(caught.value)
    assert message == (
        "Cannot reach the Docker engine at unix:///nonexistent.sock, taken from DOCKER_HOST "
        "(set DOCKER_HOST or start Docker): No such file or directory"
    )
    assert "\n" not in message
    # Raised from nothing: no chained traceback of the HTTP stack reaches the user.
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None or caught.value.__suppress_context__
    assert caught.value.retryable


def _write_context(config_dir: Path, name: str, host: str, *, current: bool) -> None:
    meta_dir = config_dir / "contexts" / "meta" / hashlib.sha256(name.encode()).hexdigest()
    meta_dir.mkdir(parents=True)
    meta = {"Name": name, "Metadata": {}, "Endpoints": {"docker": {"Host": host}}}
    (meta_dir / "meta.json").write_text(json.dumps(meta))
    if current:
        (config_dir / "config.json").write_text(json.dumps({"currentContext": name}))


async def test_current_docker_context_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    _write_context(tmp_path, "remote-box", "unix:///run/remote-box.sock", current=True)
    endpoint = docker_endpoint()
    assert (endpoint.host, endpoint.source) == ("unix:///run/remote-box.sock", "context remote-box")
    with pytest.raises(DockerUnavailableError) as caught:
        await DockerSandbox().start()
    assert str(caught.value).startswith(
        "Cannot reach the Docker engine at unix:///run/remote-box.sock, "
        "taken from context remote-box (set DOCKER_HOST or start Docker)"
    )


def test_docker_context_variable_and_docker_host_take_precedence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    _write_context(tmp_path, "in-config", "tcp://10.0.0.1:2375", current=True)
    _write_context(tmp_path, "in-variable", "tcp://10.0.0.2:2375", current=False)
    assert docker_endpoint().host == "tcp://10.0.0.1:2375"
    monkeypatch.setenv("DOCKER_CONTEXT", "in-variable")
    assert docker_endpoint().host == "tcp://10.0.0.2:2375"
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.3:2375")
    assert docker_endpoint().host == "tcp://10.0.0.3:2375"


async def test_context_with_partial_tls_material_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    _write_context(tmp_path, "half-tls", "tcp://127.0.0.1:9", current=True)
    context_id = hashlib.sha256(b"half-tls").hexdigest()
    tls_dir = tmp_path / "contexts" / "tls" / context_id / "docker"
    tls_dir.mkdir(parents=True)
    (tls_dir / "ca.pem").write_text("not a real certificate")
    with pytest.raises(DockerUnavailableError) as caught:
        await DockerSandbox().start()
    assert "lacks cert.pem, key.pem" in str(caught.value)


def test_unknown_context_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.setenv("DOCKER_CONTEXT", "gone")
    with pytest.raises(DockerUnavailableError, match="the Docker context 'gone'"):
        docker_endpoint()


def test_no_configuration_means_the_local_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    endpoint = docker_endpoint()
    assert (endpoint.host, endpoint.source) == ("unix:///var/run/docker.sock", "default")
