"""Helpers shared by the Docker tests of the sandbox."""

from __future__ import annotations

import functools
import os

import docker

from sandcrew.sandbox._labels import OWNER_PID_LABEL, PRODUCT_FILTER


def our_containers(client: docker.DockerClient, *, owner_pid: int | None = None) -> list[str]:
    """Ids of sandcrew containers owned by this test process (or by ``owner_pid``)."""
    pid = os.getpid() if owner_pid is None else owner_pid
    found = client.api.containers(
        all=True, filters={"label": [PRODUCT_FILTER, f"{OWNER_PID_LABEL}={pid}"]}
    )
    return [str(container["Id"]) for container in found]


@functools.cache
def shared_client() -> docker.DockerClient:
    """One client for helpers that run outside fixtures (kept open for the session)."""
    return docker.from_env()
