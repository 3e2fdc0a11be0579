"""Fixtures of the sandbox tests (the Docker fixtures live in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import docker
import pytest

from sandcrew.sandbox import DockerSandbox, SandboxConfig
from tests.sandbox.helpers import SANDBOX_IMAGE

IMAGE = SANDBOX_IMAGE


# Short limits keep the attack tests fast.
FAST = SandboxConfig(timeout=3.0)


@pytest.fixture
async def sandbox(docker_client: docker.DockerClient) -> AsyncIterator[DockerSandbox]:
    async with DockerSandbox(FAST, docker_client=docker_client) as started:
        yield started
