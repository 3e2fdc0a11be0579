"""Each hardening default, proven from inside the container (or by the engine's own record)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import docker
import pytest

from sandcrew.sandbox import DockerSandbox, SandboxConfig
from sandcrew.sandbox._seccomp import seccomp_profile
from tests.sandbox.helpers import our_containers

pytestmark = pytest.mark.docker

MIB = 1024 * 1024

# Reads a cgroup setting on cgroup v1 (a folder per controller) or v2 (one hierarchy).
READ_CGROUP = """
import os
def cgroup(v1, v2):
    for path in ('/sys/fs/cgroup/' + v1, '/sys/fs/cgroup/' + v2):
        if os.path.exists(path):
            return open(path).read().strip()
    return 'missing'
"""


async def test_memory_limit_with_swap_off(sandbox: DockerSandbox) -> None:
    code = READ_CGROUP + (
        "print(cgroup('memory/memory.limit_in_bytes', 'memory.max'))\n"
        "print(cgroup('memory/memory.memsw.limit_in_bytes', 'memory.swap.max'))\n"
    )
    result = await sandbox.run(code)
    memory, swap = result.stdout.split()
    assert int(memory) == 256 * MIB
    # v1: memory+swap equal to memory; v2: no swap at all.
    assert int(swap) in (256 * MIB, 0)


async def test_pids_limit(sandbox: DockerSandbox) -> None:
    result = await sandbox.run(READ_CGROUP + "print(cgroup('pids/pids.max', 'pids.max'))")
    assert result.stdout == "64\n"


async def test_cpu_quota(docker_client: docker.DockerClient) -> None:
    code = READ_CGROUP + (
        "print(cgroup('cpu/cpu.cfs_quota_us', 'cpu.max').split()[0])\n"
        "print(cgroup('cpu/cpu.cfs_period_us', 'cpu.max').split()[-1])\n"
    )
    for cpus in (1.0, 0.5):
        config = SandboxConfig(cpus=cpus)
        async with DockerSandbox(config, docker_client=docker_client) as sandbox:
            result = await sandbox.run(code)
        quota, period = (int(value) for value in result.stdout.split())
        assert quota / period == cpus


async def test_ulimits(sandbox: DockerSandbox) -> None:
    code = (
        "import resource\n"
        "for name in ('RLIMIT_FSIZE', 'RLIMIT_NOFILE', 'RLIMIT_CORE'):\n"
        "    print(*resource.getrlimit(getattr(resource, name)))\n"
    )
    result = await sandbox.run(code)
    assert result.stdout.splitlines() == [
        f"{16 * MIB} {16 * MIB}",
        "256 256",
        "0 0",
    ]


async def test_tmpfs_sizes_and_options(sandbox: DockerSandbox) -> None:
    code = """
import os
for path in ('/workspace', '/tmp', '/dev/shm'):
    stats = os.statvfs(path)
    options = [line.split()[3] for line in open('/proc/self/mounts') if line.split()[1] == path][-1]
    flags = sorted(set(options.split(',')) & {'nosuid', 'nodev', 'noexec', 'rw'})
    print(path, stats.f_blocks * stats.f_frsize, ','.join(flags), os.access(path, os.W_OK))
print(os.getcwd(), os.stat('/workspace').st_uid == os.getuid())
"""
    result = await sandbox.run(code)
    assert result.stdout.splitlines() == [
        f"/workspace {64 * MIB} nodev,noexec,nosuid,rw True",
        f"/tmp {64 * MIB} nodev,noexec,nosuid,rw True",
        f"/dev/shm {16 * MIB} nodev,noexec,nosuid,rw True",
        "/workspace True",
    ]


async def test_custom_limits_take_effect(docker_client: docker.DockerClient) -> None:
    config = SandboxConfig(
        memory_bytes=64 * MIB,
        pids_limit=32,
        tmp_tmpfs_bytes=8 * MIB,
        open_files_limit=64,
        user="12345:23456",
    )
    code = READ_CGROUP + (
        "import os, resource\n"
        "print(cgroup('memory/memory.limit_in_bytes', 'memory.max'))\n"
        "print(cgroup('pids/pids.max', 'pids.max'))\n"
        "stats = os.statvfs('/tmp'); print(stats.f_blocks * stats.f_frsize)\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
        "print(os.getuid(), os.getgid())\n"
    )
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        result = await sandbox.run(code)
    assert result.stdout.splitlines() == [
        str(64 * MIB),
        "32",
        str(8 * MIB),
        "64",
        "12345 23456",
    ]


async def test_init_process_reaps_zombies(sandbox: DockerSandbox) -> None:
    # The child forks a grandchild and exits at once: the orphaned grandchild is re-parented
    # to PID 1, which must reap it when it exits. The grandchild's end of a pipe closing
    # says it has exited; its /proc entry (a zombie keeps one) going away says it was reaped.
    # Were it never reaped, the loop would run into the time limit.
    code = """
import os, time
read_end, write_end = os.pipe()
child = os.fork()
if child == 0:
    if os.fork() == 0:
        os.write(write_end, str(os.getpid()).encode())
        os._exit(0)
    os._exit(0)
os.close(write_end)
os.waitpid(child, 0)
grandchild = int(os.read(read_end, 32))
assert os.read(read_end, 1) == b""
while os.path.exists(f"/proc/{grandchild}"):
    time.sleep(0.01)
states = []
for pid in filter(str.isdigit, os.listdir('/proc')):
    with open(f'/proc/{pid}/stat') as handle:
        states.append(handle.read().split(')')[1].split()[0])
print(open('/proc/1/cmdline').read().split('\\0')[0])
print('zombies', states.count('Z'))
"""
    result = await sandbox.run(code)
    assert result.ok, result.stderr
    init, zombies = result.stdout.splitlines()
    assert init.endswith("init")
    assert zombies == "zombies 0"


async def test_network_is_opt_in(docker_client: docker.DockerClient) -> None:
    async with DockerSandbox(SandboxConfig(network=True), docker_client=docker_client) as sandbox:
        result = await sandbox.run("import os\nprint(sorted(os.listdir('/sys/class/net')))")
    assert result.stdout == "['eth0', 'lo']\n"


def _total_size(files: Iterable[Path]) -> int:
    """Sizes of ``files``; one that rotation removed between listing and reading counts 0."""
    total = 0
    for file in files:
        with contextlib.suppress(FileNotFoundError):
            total += file.stat().st_size
    return total


async def _inspect_while_running(
    client: docker.DockerClient, sandbox: DockerSandbox, code: str
) -> tuple[dict[str, Any], int]:
    """Start ``code``, inspect its container while it runs, return (inspection, log size)."""
    run = asyncio.create_task(sandbox.run(code))
    try:
        deadline = time.monotonic() + 60  # a cold container on a busy shared engine
        while not (found := our_containers(client)):
            assert time.monotonic() < deadline, "the run's container never appeared"
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.5)  # let the flood go on for a while
        inspection: dict[str, Any] = client.api.inspect_container(found[0])
        log_path = inspection["LogPath"]
        # Rotation briefly renames the file (to .1): count every log file of it.
        log_size = (
            _total_size(Path(log_path).parent.glob(f"{Path(log_path).name}*")) if log_path else 0
        )
    finally:
        result = await run
    assert result.timed_out
    return inspection, log_size


FLOOD = "import sys\nwhile True:\n    sys.stdout.write('z' * 65535 + '\\n')\n"


async def test_docker_stores_no_log_by_default(
    docker_client: docker.DockerClient, sandbox: DockerSandbox
) -> None:
    inspection, log_size = await _inspect_while_running(docker_client, sandbox, FLOOD)
    assert inspection["HostConfig"]["LogConfig"] == {"Type": "none", "Config": {}}
    assert inspection["LogPath"] == ""
    assert log_size == 0


async def test_json_file_log_is_capped(docker_client: docker.DockerClient) -> None:
    config = SandboxConfig(timeout=3.0, log_driver="json-file", log_max_bytes=256 * 1024)
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        inspection, log_size = await _inspect_while_running(docker_client, sandbox, FLOOD)
    assert inspection["HostConfig"]["LogConfig"] == {
        "Type": "json-file",
        "Config": {"max-file": "1", "max-size": str(256 * 1024)},
    }
    # Hundreds of MiB were printed; the engine kept the current file and one rotated.
    assert 0 < log_size <= 3 * 256 * 1024


async def test_engine_record_matches_the_hardening(
    docker_client: docker.DockerClient, sandbox: DockerSandbox
) -> None:
    inspection, _ = await _inspect_while_running(
        docker_client, sandbox, "import time\ntime.sleep(60)"
    )
    host = inspection["HostConfig"]
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"]
    assert sorted(host["CapAdd"]) == ["KILL", "SETGID", "SETPCAP", "SETUID"]
    assert host["SecurityOpt"][0] == "no-new-privileges:true"
    assert json.loads(host["SecurityOpt"][1].removeprefix("seccomp=")) == seccomp_profile()
    assert host["Init"] is True
    assert host["IpcMode"] == "private"  # no other container may join its IPC namespace
    assert host["Memory"] == host["MemorySwap"] == 256 * MIB
    assert host["Binds"] is None
    assert inspection["Config"]["NetworkDisabled"] is True
    # The supervisor starts as root and drops to the run's uid (see test_integrity).
    assert inspection["Config"]["User"] == "0:0"
    assert inspection["Mounts"] == []
