"""The deadline: a program that ends in time is never called timed out, and the kill holds."""

from __future__ import annotations

import asyncio
import time

import docker
import pytest

from sandcrew.sandbox import DockerSandbox, SandboxConfig

pytestmark = pytest.mark.docker

# Ends 1.5 s after its process started (read from /proc, so the interpreter's own
# start-up on a busy machine does not count), 0.5 s before a 2 s deadline: room for its
# exit on a loaded machine, never enough for a deadline counted from the wrong moment.
_ENDS_JUST_IN_TIME = """
import os, sys, time
fields = open('/proc/self/stat').read().rsplit(')', 1)[1].split()
started = int(fields[19]) / os.sysconf('SC_CLK_TCK')
time.sleep(max(0.0, started + 1.5 - time.clock_gettime(time.CLOCK_BOOTTIME)))
print('finished')
sys.exit(1)
"""


@pytest.mark.parametrize("pool_size", [0, 1], ids=["cold", "pooled"])
async def test_a_failure_just_before_the_deadline_is_not_a_timeout(
    docker_client: docker.DockerClient, pool_size: int
) -> None:
    config = SandboxConfig(timeout=2.0, pool_size=pool_size)
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        for _ in range(4):
            result = await sandbox.run(_ENDS_JUST_IN_TIME)
            assert not result.timed_out, result
            assert result.exit_code == 1
            assert result.stdout == "finished\n"


async def test_the_deadline_fires_while_the_event_loop_is_blocked(
    docker_client: docker.DockerClient,
) -> None:
    counter = "import time\nfor i in range(100):\n    print(i, flush=True)\n    time.sleep(0.2)\n"

    async def block_the_loop() -> None:
        await asyncio.sleep(0.3)
        time.sleep(3)  # noqa: ASYNC251 - the caller blocks its own loop, on purpose

    async with DockerSandbox(SandboxConfig(timeout=1.0), docker_client=docker_client) as sandbox:
        result, _ = await asyncio.gather(sandbox.run(counter), block_the_loop())

    assert result.timed_out, result
    assert result.exit_code == 124
    assert result.duration < 2.5
    assert len(result.stdout.splitlines()) <= 7, result.stdout
