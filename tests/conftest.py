"""Project-wide test settings: hermetic environment, no real model ever reached, and the
Docker fixtures (a test marked ``docker`` gets the real engine and a leftover check)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from sandcrew.errors import DockerUnavailableError
from sandcrew.sandbox import DockerSandbox, SandboxConfig
from sandcrew.sandbox.host import connect_docker
from tests.sandbox.helpers import SANDBOX_IMAGE, our_containers


def pytest_configure(config: pytest.Config) -> None:
    # A shell starts a background job with Ctrl-C ignored, and an ignored signal stays
    # ignored in every child: the Ctrl-C tests' programs would never see theirs.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


# Variables that would point the product at a real model or change its defaults.
_PRODUCT_VARIABLE_PREFIXES = ("OPENAI_", "AZURE_OPENAI_", "SANDCREW_", "E2B_")


@pytest.fixture(scope="session")
def empty_config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("config") / "config.toml"
    path.write_text("")
    return path


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch, empty_config_file: Path) -> None:
    """Strip model and product settings so that no test depends on the host's."""
    for name in list(os.environ):
        if name.startswith(_PRODUCT_VARIABLE_PREFIXES):
            monkeypatch.delenv(name)
    # Not the developer's ~/.config/sandcrew/config.toml either.
    monkeypatch.setenv("SANDCREW_CONFIG", str(empty_config_file))
    # A test that forgets to point at the scripted server must fail, not reach a model.
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    # Each `sandcrew` child runs in its own process (whose pid owns its containers), even
    # with a developer's warm process running; tests/cli/test_warm.py starts its own.
    monkeypatch.setenv("SANDCREW_WARM", "0")


@pytest.fixture(scope="session")
def _docker_engine() -> Iterator[docker.DockerClient]:
    """The real engine with the sandbox image; unreachable or imageless FAILS, never skips."""
    try:
        client = connect_docker()
    except DockerUnavailableError as exc:
        pytest.fail(f"Docker tests need a reachable engine: {exc}")
    try:
        client.images.get(SANDBOX_IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(
            f"The sandbox image {SANDBOX_IMAGE} is missing; build it with `sandcrew images build`"
        )
    yield client
    client.close()


@pytest.fixture
def docker_client(request: pytest.FixtureRequest, _docker_engine: docker.DockerClient) -> Any:
    """The Docker client, for tests marked ``docker`` only (so leftovers are checked)."""
    if request.node.get_closest_marker("docker") is None:
        pytest.fail("a test that uses Docker must be marked @pytest.mark.docker")
    return _docker_engine


SHORT_LIMITS = SandboxConfig(timeout=3.0)
"""Short limits keep the attack tests fast."""


@pytest.fixture
async def sandbox(docker_client: docker.DockerClient) -> AsyncIterator[DockerSandbox]:
    """A started sandbox with short limits, on the engine (tests marked ``docker`` only)."""
    async with DockerSandbox(SHORT_LIMITS, docker_client=docker_client) as started:
        yield started


@pytest.fixture(autouse=True)
def no_leftover_containers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test marked ``docker`` leaves no sandbox container of this process behind."""
    if request.node.get_closest_marker("docker") is None:
        yield
        return
    client: docker.DockerClient = request.getfixturevalue("_docker_engine")
    yield
    leftovers = our_containers(client)
    if leftovers:
        # Removal is awaited by every run; give a failing test's cleanup a moment anyway.
        time.sleep(0.5)
        leftovers = our_containers(client)
    for container_id in leftovers:
        client.api.remove_container(container_id, force=True)
    assert leftovers == [], f"sandbox containers left behind: {leftovers}"
