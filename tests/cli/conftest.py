"""Fixtures of the command-line tests: the real Docker engine (never skipped)."""

from __future__ import annotations

import docker
import pytest


@pytest.fixture(scope="session")
def docker_client() -> docker.DockerClient:
    return docker.from_env()
