"""A session's container never outlives its owner, its idle timeout or its lifetime."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time

import docker
import pytest

from sandcrew.sandbox import DockerSandbox, SessionClosedError, SessionLimits
from tests.sandbox.helpers import our_containers

pytestmark = [pytest.mark.docker, pytest.mark.slow]

GONE_WITHIN = 20.0


def _exists(client: docker.DockerClient, name: str) -> bool:
    return bool(client.api.containers(all=True, filters={"name": f"^/{name}$"}))


def _wait_until_gone(client: docker.DockerClient, name: str) -> bool:
    give_up = time.monotonic() + GONE_WITHIN
    while time.monotonic() < give_up:
        if not _exists(client, name):
            return True
        time.sleep(0.2)
    return False


async def test_an_idle_session_ends_and_its_container_is_removed(
    sandbox: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    session = await sandbox.session(limits=SessionLimits(idle_timeout=1)).start()
    try:
        name = session.container_name
        assert name is not None
        assert (await session.run("print('used')")).stdout == "used\n"

        assert await asyncio.to_thread(_wait_until_gone, docker_client, name)
        with pytest.raises(SessionClosedError, match="idle"):
            await session.run("print('again')")
    finally:
        await session.close()


async def test_a_session_ends_at_its_maximum_lifetime_even_while_busy(
    sandbox: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    # Longer than a start on a busy machine, so the end comes while the cell runs.
    limits = SessionLimits(max_lifetime=30, cell_timeout=120)
    async with sandbox.session(limits=limits) as session:
        name = session.container_name
        assert name is not None
        with pytest.raises(SessionClosedError, match="maximum lifetime"):
            await session.run("import time\ntime.sleep(100)")

        assert await asyncio.to_thread(_wait_until_gone, docker_client, name)


OWNER = """
import asyncio
from sandcrew.sandbox import DockerSandbox

async def main():
    async with DockerSandbox() as sandbox, sandbox.session() as session:
        await session.run("x = 1")
        print(session.container_name, flush=True)
        await asyncio.sleep(600)

asyncio.run(main())
"""


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=str)
def test_the_owner_exiting_leaves_nothing_behind(
    docker_client: docker.DockerClient, number: signal.Signals
) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert owner.stdout is not None
        name = owner.stdout.readline().decode().strip()
        assert name.startswith("sandcrew-"), owner.stderr.read() if owner.stderr else ""
        assert _exists(docker_client, name)

        owner.send_signal(number)
        owner.wait(30)

        assert _wait_until_gone(docker_client, name)
        assert our_containers(docker_client, owner_pid=owner.pid) == []
    finally:
        if owner.poll() is None:
            owner.kill()
        owner.wait()
        for stream in (owner.stdout, owner.stderr):
            if stream is not None:
                stream.close()
