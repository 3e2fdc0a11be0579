"""Fixtures of the sandbox tests: a real Docker engine, the real image, no leftovers.

A test marked ``docker`` that cannot reach Docker or finds no image FAILS with
the fix; it is never skipped.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import docker
import docker.errors
import pytest

from sandcrew.sandbox import DEFAULT_IMAGES, DockerSandbox, SandboxConfig
from sandcrew.sandbox._docker_client import connect

from .helpers import our_containers

IMAGE = DEFAULT_IMAGES["python"]


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    client = connect()
    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"The sandbox image {IMAGE} is missing; build it with `sandcrew images build`")
    yield client
    client.close()


@pytest.fixture(autouse=True)
def no_leftover_containers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every Docker test must leave no sandbox container of this process behind."""
    if request.node.get_closest_marker("docker") is None:
        yield
        return
    client: docker.DockerClient = request.getfixturevalue("docker_client")
    yield
    leftovers = our_containers(client)
    if leftovers:
        # Removal is awaited by every run; give a failing test's cleanup a moment anyway.
        time.sleep(0.5)
        leftovers = our_containers(client)
    for container_id in leftovers:
        client.api.remove_container(container_id, force=True)
    assert leftovers == [], f"sandbox containers left behind: {leftovers}"


# Short limits keep the attack tests fast.
FAST = SandboxConfig(timeout=3.0)


@pytest.fixture
async def sandbox(docker_client: docker.DockerClient) -> AsyncIterator[DockerSandbox]:
    async with DockerSandbox(FAST, docker_client=docker_client) as started:
        yield started
