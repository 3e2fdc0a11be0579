"""Helpers shared by the Docker tests of the sandbox."""

from __future__ import annotations

import binascii
import contextlib
import functools
import os
import re
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator

import docker
import docker.errors

from sandcrew.sandbox._labels import (
    OWNER_PID_LABEL,
    POOLED_LABEL,
    PRODUCT_FILTER,
    RUN_ID_LABEL,
    process_status,
)
from sandcrew.sandbox.images import DEFAULT_IMAGES

SANDBOX_IMAGE = DEFAULT_IMAGES["python"]
"""The image every Docker test runs (built by `sandcrew images build`)."""


def our_containers(client: docker.DockerClient, *, owner_pid: int | None = None) -> list[str]:
    """Ids of sandcrew containers owned by this test process (or by ``owner_pid``)."""
    pid = os.getpid() if owner_pid is None else owner_pid
    found = client.api.containers(
        all=True, filters={"label": [PRODUCT_FILTER, f"{OWNER_PID_LABEL}={pid}"]}
    )
    return [str(container["Id"]) for container in found]


def process_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, ended but not waited for, is not)."""
    status = process_status(pid)
    return status is not None and status[0] not in ("Z", "X")


def wait_until_gone(pid: int, *, within: float = 20.0) -> list[str]:
    """Wait for process ``pid`` to end and its containers to go; the containers still there."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        leftovers = our_containers(shared_client(), owner_pid=pid)
        if not leftovers and not process_alive(pid):
            return []
        time.sleep(0.2)
    return our_containers(shared_client(), owner_pid=pid)


def waiting_members(client: docker.DockerClient, *, owner_pid: int | None = None) -> dict[str, str]:
    """Run id → container id of the running pooled containers of this process (or ``owner_pid``)."""
    pid = os.getpid() if owner_pid is None else owner_pid
    found = client.api.containers(
        filters={
            "label": [PRODUCT_FILTER, f"{OWNER_PID_LABEL}={pid}", f"{POOLED_LABEL}=true"],
            "status": "running",
        }
    )
    return {container["Labels"][RUN_ID_LABEL]: str(container["Id"]) for container in found}


def container_exists(client: docker.DockerClient, container_id: str) -> bool:
    """Whether the engine still has the container.

    Tests that plant an orphan judge the reaper by this, not by the ids one call
    returns: every sandcrew process that starts a sandbox reaps too (other test
    workers among them), and may remove the orphan first.
    """
    return container_state(client, container_id) != "gone"


def removed_soon(client: docker.DockerClient, container_id: str, *, within: float = 60.0) -> bool:
    """Whether the container is gone within ``within`` seconds.

    For a test that just reaped: when another test worker's reaper had begun removing
    the same orphan, this one's skipped it (the engine answers 409) and the removal may
    still be under way.
    """
    deadline = time.monotonic() + within
    while container_exists(client, container_id):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def container_state(client: docker.DockerClient, container_id: str) -> str:
    """``gone``, or the engine's status of the container (``running``, ``exited``, ...)."""
    try:
        return str(client.api.inspect_container(container_id)["State"]["Status"])
    except docker.errors.NotFound:
        return "gone"


@functools.cache
def shared_client() -> docker.DockerClient:
    """One client for helpers that run outside fixtures (kept open for the session)."""
    return docker.from_env()


@contextlib.contextmanager
def python_process(script: str) -> Iterator[subprocess.Popen[bytes]]:
    """A separate Python process running ``script``; killed (if still alive) at exit."""
    process = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        assert process.stderr is not None
        process.stderr.close()


RELEASE_FILE = "/tmp/go"
WAITS_FOR_RELEASE = (
    "import os, sys, time\n"
    "sys.stdout.write('waiting\\n')\n"
    "sys.stdout.flush()\n"
    f"while not os.path.exists({RELEASE_FILE!r}):\n"
    "    time.sleep(0.05)\n"
    "sys.stdout.write('released\\n')\n"
    "sys.stdout.flush()\n"
)
"""Prints ``waiting``, then runs until :func:`release_program` lets it end: its first line
can only be seen before it ends if output is live.

Each line is one write: the image runs Python unbuffered, where ``print`` writes a line and
its newline apart, and Docker may then deliver what the program wrote earlier on stderr
between the two (stdout and stderr are read apart), so a test waiting for the whole line on
a shared terminal would never see it."""


def release_program(client: docker.DockerClient, *, owner_pid: int | None = None) -> None:
    """Let the program waiting in the one running sandbox container of ``owner_pid`` end."""
    running = [
        container_id
        for container_id in our_containers(client, owner_pid=owner_pid)
        if client.api.inspect_container(container_id)["State"]["Running"]
    ]
    assert len(running) == 1, f"expected one running sandbox container, found {running}"
    execution = client.api.exec_create(running[0], ["touch", RELEASE_FILE])
    client.api.exec_start(execution)
    assert client.api.exec_inspect(execution)["ExitCode"] == 0


def carried_sources(bootstrap: str) -> dict[str, str]:
    """The module sources a command's bootstrap carries, unpacked as the container does."""
    packed = re.search(r"a2b_base64\('([A-Za-z0-9+/=]+)'\)", bootstrap)
    assert packed is not None, "no packed sources in the bootstrap"
    parts = zlib.decompress(binascii.a2b_base64(packed.group(1))).decode().split("\0")
    return dict(zip(parts[::2], parts[1::2], strict=True))
