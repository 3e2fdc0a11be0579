"""Fixtures of the suite tests: small suite files and a check for leftover containers."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest

from tests.sandbox.helpers import our_containers, shared_client
from tests.suites.ray_cluster import CLUSTER_ENV

WriteFile = Callable[[str, str], Path]
"""The ``write_file`` fixture: (name, dedented text) → the written path."""


def own_containers() -> list[str]:
    """Sandbox containers made by this test process (other processes may share the engine)."""
    return our_containers(shared_client())


@pytest.fixture
def list_own_containers() -> Callable[[], list[str]]:
    """The ids of this process's sandbox containers, read from the Docker engine."""
    return own_containers


@pytest.fixture
def write_file(tmp_path: Path) -> WriteFile:
    """Write dedented text to ``tmp_path / name`` and return the path."""

    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return write


@pytest.fixture
def cluster_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drivers a test starts reach its private Ray clusters: no token authentication."""
    for name, value in CLUSTER_ENV.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def engine() -> Iterator[docker.DockerClient]:
    """A client of the Docker engine, closed after the test."""
    client = docker.from_env()
    yield client
    client.close()
