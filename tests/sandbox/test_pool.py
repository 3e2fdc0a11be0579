"""The pool of pre-started containers: fast, yet every container still serves one run only."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator

import docker
import docker.errors
import pytest

from sandcrew.errors import ConfigurationError, ImageNotFoundError
from sandcrew.sandbox import DockerSandbox, ExecutionResult, SandboxConfig
from sandcrew.sandbox._container import Launch, create_options, discard_container
from sandcrew.sandbox._execution import execute
from sandcrew.sandbox._streams import CappedBuffer, Demultiplexer
from sandcrew.sandbox._supervisor import ACKNOWLEDGEMENT, program_delivery
from sandcrew.sandbox.host import reap_orphans
from tests.sandbox.conftest import IMAGE
from tests.sandbox.helpers import our_containers, python_process, waiting_members

pytestmark = pytest.mark.docker

POOLED = SandboxConfig(timeout=3.0, pool_size=2)


@pytest.fixture
async def pooled(docker_client: docker.DockerClient) -> AsyncIterator[DockerSandbox]:
    async with DockerSandbox(POOLED, docker_client=docker_client) as started:
        yield started


def test_pool_size_must_not_be_negative() -> None:
    with pytest.raises(ConfigurationError, match=r"pool_size must be >= 0 \(got -1\)"):
        SandboxConfig(pool_size=-1)


async def test_start_fills_the_pool_and_runs_take_from_it(
    docker_client: docker.DockerClient, pooled: DockerSandbox
) -> None:
    waiting = waiting_members(docker_client)
    assert len(waiting) == 2

    result = await pooled.run("import sys\nprint('out')\nprint('err', file=sys.stderr)\nexit(3)")

    assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err\n", 3)
    assert result.run_id in waiting
    assert result.duration > 0


async def test_python_and_bash_share_the_pool(
    docker_client: docker.DockerClient, pooled: DockerSandbox
) -> None:
    waiting = waiting_members(docker_client)
    bash = await pooled.run('echo "$((6 * 7)) $0"', "bash")
    python = await pooled.run("import os\nprint(6 * 7, os.environ['PYTHONUNBUFFERED'])")
    assert bash.stdout == "42 /workspace/main.sh\n"
    assert python.stdout == "42 1\n"
    assert {bash.run_id, python.run_id} <= set(waiting)


async def test_twenty_runs_at_concurrency_four(pooled: DockerSandbox) -> None:
    limit = asyncio.Semaphore(4)

    async def one(index: int) -> ExecutionResult:
        async with limit:
            return await pooled.run(f"print({index} * {index})")

    results = await asyncio.gather(*(one(index) for index in range(20)))
    assert [result.stdout for result in results] == [f"{index * index}\n" for index in range(20)]
    assert all(result.ok for result in results)
    assert len({result.run_id for result in results}) == 20


async def test_a_pooled_container_is_never_reused(pooled: DockerSandbox) -> None:
    code = (
        "import os\n"
        "print(sorted(os.listdir('/tmp')), sorted(os.listdir('/workspace')))\n"
        "open('/tmp/marker', 'w').close()\n"
        "open('/workspace/marker', 'w').close()\n"
        "print(open('/proc/self/cgroup').read().strip().splitlines()[-1])\n"
    )
    results = [await pooled.run(code) for _ in range(6)]
    assert [result.stdout.splitlines()[0] for result in results] == [
        "['.sandcrew-site'] ['main.py', 'out']"
    ] * 6
    assert len({result.stdout.splitlines()[1] for result in results}) == 6
    assert len({result.run_id for result in results}) == 6


async def test_the_deadline_counts_from_the_program_not_the_container_start(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(timeout=1.0, pool_size=1)
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        await asyncio.sleep(1.5)  # the waiting container is older than the timeout
        patient = await sandbox.run("import time\ntime.sleep(0.5)\nprint('done')")
        endless = await sandbox.run("import time\ntime.sleep(30)")
    assert patient.ok
    assert patient.stdout == "done\n"
    assert endless.timed_out
    assert 1.0 <= endless.duration < 3


async def test_a_run_longer_than_the_pool_allows_gets_its_own_container(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(timeout=1.0, pool_size=1, pool_idle_seconds=1.0)
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        waiting = waiting_members(docker_client)
        result = await sandbox.run("print('long')", timeout=30)
    assert result.stdout == "long\n"
    assert result.run_id not in waiting


async def test_a_pool_that_cannot_launch_reports_why_to_the_run(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(images={"python": "sandcrew/no-such-image:never"}, pool_size=2)
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        for _ in range(2):
            with pytest.raises(ImageNotFoundError, match="sandcrew does not build it"):
                await sandbox.run("print(1)")
    assert our_containers(docker_client) == []


@pytest.mark.parametrize("wait_for_its_end", [True, False], ids=["ended", "ending"])
async def test_a_container_killed_while_waiting_is_replaced(
    docker_client: docker.DockerClient, wait_for_its_end: bool
) -> None:
    config = SandboxConfig(timeout=3.0, pool_size=1)
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        ((killed_run, killed_id),) = waiting_members(docker_client).items()
        docker_client.api.kill(killed_id, signal="SIGKILL")
        if wait_for_its_end:
            docker_client.api.wait(killed_id)

        result = await sandbox.run("print('fresh')")

    assert result.ok
    assert result.stdout == "fresh\n"
    assert result.run_id != killed_run


async def test_waiting_containers_older_than_their_idle_lifetime_are_replaced(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(timeout=3.0, pool_size=2, pool_idle_seconds=1.0)
    async with DockerSandbox(config, docker_client=docker_client):
        first = set(waiting_members(docker_client))
        assert len(first) == 2
        for _ in range(100):
            now = set(waiting_members(docker_client))
            if len(now) == 2 and not now & first:
                break
            await asyncio.sleep(0.1)
        assert len(now) == 2
        assert not now & first


async def test_another_sandbox_reaper_spares_waiting_containers_of_a_live_owner(
    docker_client: docker.DockerClient, pooled: DockerSandbox
) -> None:
    waiting = waiting_members(docker_client)
    for container_id in waiting.values():
        labels = docker_client.api.inspect_container(container_id)["Config"]["Labels"]
        # Room for twice the idle lifetime (300 s), the run timeout and the grace.
        assert float(labels["sandcrew.deadline"]) >= time.time() + 2 * 300 + 3 + 60 - 10

    await DockerSandbox(docker_client=docker_client).start()
    removed = reap_orphans(docker_client)

    assert not set(removed) & set(waiting.values())
    assert waiting_members(docker_client) == waiting
    result = await pooled.run("print('still here')")
    assert result.stdout == "still here\n"
    assert result.run_id in waiting


async def test_closing_removes_the_waiting_containers(docker_client: docker.DockerClient) -> None:
    async with DockerSandbox(POOLED, docker_client=docker_client) as sandbox:
        assert len(waiting_members(docker_client)) == 2
        await sandbox.run("print(1)")
        # Closing right after a take also catches the refill on its way.
    assert our_containers(docker_client) == []


def test_an_interrupted_close_still_closes_every_pool(
    docker_client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two image references, so two pools.
    images = {"python": IMAGE, "bash": str(docker_client.images.get(IMAGE).id)}
    sandbox = DockerSandbox(SandboxConfig(pool_size=1, images=images), docker_client=docker_client)
    sandbox.__enter__()
    first = sandbox._supply._pools[IMAGE]
    close_first = first.close

    def interrupted() -> None:
        close_first()
        raise KeyboardInterrupt  # Ctrl-C right after the first pool closed

    monkeypatch.setattr(first, "close", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sandbox.close()
    assert list(sandbox._supply._pools.values()) == [first]  # kept, so the next close finishes it
    monkeypatch.undo()
    sandbox.close()
    assert our_containers(docker_client) == []


_FORKING_OWNER = """
import os, sys
from sandcrew.sandbox import DockerSandbox, SandboxConfig
sandbox = DockerSandbox(SandboxConfig(pool_size=1))
sandbox.__enter__()
if os.fork() == 0:
    sys.exit(0)  # a forked worker that ends normally runs the exit hooks it inherited
os.wait()
api = sandbox.client.api
for pool in sandbox._supply._pools.values():
    for member in pool._idle:
        print(api.inspect_container(member.container_id)["State"]["Running"])
sandbox.close()
"""


def test_a_forked_child_leaves_the_parents_pool_alone() -> None:
    owner = subprocess.run(
        [sys.executable, "-c", _FORKING_OWNER], capture_output=True, timeout=60, check=True
    )
    assert owner.stdout.split() == [b"True"], owner.stderr


def test_leaving_the_sync_block_removes_the_waiting_containers(
    docker_client: docker.DockerClient,
) -> None:
    with DockerSandbox(POOLED, docker_client=docker_client) as sync_sandbox:
        assert len(waiting_members(docker_client)) == 2
        assert sync_sandbox.run_sync("print(2)").stdout == "2\n"
    assert our_containers(docker_client) == []


async def test_cancelling_the_owner_removes_every_container(
    docker_client: docker.DockerClient,
) -> None:
    async def owner() -> None:
        async with DockerSandbox(POOLED, docker_client=docker_client) as sandbox:
            await sandbox.run("import time\ntime.sleep(60)", timeout=60)

    task = asyncio.create_task(owner())
    for _ in range(200):
        # Two waiting containers, and the run's own.
        if len(our_containers(docker_client)) >= 3:
            break
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert our_containers(docker_client) == []


async def test_a_run_cancelled_while_waiting_for_a_container_leaves_nothing(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(timeout=3.0, pool_size=1)
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        runs = [asyncio.create_task(sandbox.run("print(1)")) for _ in range(4)]
        await asyncio.sleep(0.01)
        for run in runs[1:]:
            run.cancel()
        assert (await runs[0]).stdout == "1\n"
        for run in runs[1:]:
            with pytest.raises(asyncio.CancelledError):
                await run
        assert (await sandbox.run("print(2)")).stdout == "2\n"
    assert our_containers(docker_client) == []


def test_run_sync_returns_after_its_container_is_gone(
    docker_client: docker.DockerClient,
) -> None:
    with DockerSandbox(SandboxConfig(timeout=3.0), docker_client=docker_client) as sandbox:
        assert sandbox.run_sync("print(1)").stdout == "1\n"
        assert our_containers(docker_client) == []


# --- hardening ------------------------------------------------------------------


async def test_pooled_runs_keep_the_hardening(
    docker_client: docker.DockerClient, pooled: DockerSandbox
) -> None:
    inspection = docker_client.api.inspect_container(
        next(iter(waiting_members(docker_client).values()))
    )
    status_text = await pooled.run("cat /proc/self/status", "bash")
    status = dict(line.split(":", 1) for line in status_text.stdout.splitlines() if ":" in line)
    uid = status["Uid"].split()[0]
    assert 20000 <= int(uid) <= 59999
    assert status["Uid"].split() == [uid] * 4
    assert status["CapEff"].strip() == "0000000000000000"
    assert status["CapBnd"].strip() == "0000000000000000"
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Seccomp"].strip() == "2"

    code = (
        "import os\n"
        "print(sorted(os.listdir('/sys/class/net')))\n"
        "try:\n    open('/evil', 'w')\nexcept OSError as exc:\n    print(exc.strerror)\n"
    )
    result = await pooled.run(code)
    assert result.stdout == "['lo']\nRead-only file system\n"

    host = inspection["HostConfig"]
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"][0] == "no-new-privileges:true"
    assert host["SecurityOpt"][1].startswith("seccomp=")
    assert host["PidsLimit"] == 64
    assert inspection["Config"]["NetworkDisabled"] is True
    assert inspection["Config"]["User"] == "0:0"  # the supervisor's; the program's is above
    assert inspection["Config"]["Env"] is not None
    assert not any(variable.startswith("SANDBOX_") for variable in inspection["Config"]["Env"])


# --- crash safety -----------------------------------------------------------------

_POOLED_LONG_RUN = """
from sandcrew.sandbox import DockerSandbox, SandboxConfig
DockerSandbox(SandboxConfig(pool_size=2)).run_sync("import time; time.sleep(60)", timeout=60)
"""


@pytest.fixture
def pooled_run_process() -> Iterator[subprocess.Popen[bytes]]:
    """A separate sandcrew process with a pool, in the middle of a 60-second run."""
    with python_process(_POOLED_LONG_RUN) as process:
        yield process


async def test_ctrl_c_removes_the_run_and_the_waiting_containers(
    docker_client: docker.DockerClient, pooled_run_process: subprocess.Popen[bytes]
) -> None:
    process = pooled_run_process
    for _ in range(400):
        # The run's container and two waiting ones: the run has begun.
        if len(our_containers(docker_client, owner_pid=process.pid)) >= 3:
            break
        assert process.poll() is None, "the sandcrew process ended early"
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) != 0
    assert process.stderr is not None
    assert b"KeyboardInterrupt" in process.stderr.read()
    assert our_containers(docker_client, owner_pid=process.pid) == []


# --- a waiting container that died ---------------------------------------------------


def _frame(kind: int, payload: bytes) -> bytes:
    return bytes([kind, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


@pytest.mark.parametrize(
    ("frames", "stdout", "acknowledged"),
    [
        pytest.param([_frame(1, b".hello")], "hello", True, id="with-output"),
        pytest.param([_frame(1, b"."), _frame(1, b"..")], "..", True, id="dots-after"),
        pytest.param([_frame(2, b"oops"), _frame(1, b".x")], "x", True, id="stderr-first"),
        pytest.param([_frame(1, b"x.")], "x.", False, id="no-acknowledgement"),
    ],
)
def test_only_the_first_stdout_byte_can_be_the_acknowledgement(
    frames: list[bytes], stdout: str, acknowledged: bool
) -> None:
    streams = Demultiplexer(CappedBuffer(100), CappedBuffer(100), acknowledgement=ACKNOWLEDGEMENT)
    data = b"".join(frames)
    for index in range(len(data)):  # byte by byte: frames split anywhere
        streams.feed(data[index : index + 1])
    assert streams.stdout.text() == stdout
    assert streams.acknowledged is acknowledged
    assert streams.received


async def test_a_container_that_died_before_its_program_is_told_apart(
    docker_client: docker.DockerClient,
) -> None:
    api = docker_client.api
    config = SandboxConfig(timeout=3.0)
    options = create_options(
        api,
        config,
        image=config.images["python"],
        run_id="pooltest0dead",
        deadline=time.time() + 60,
        ids=(23456, 23456),
    )
    container = Launch(api, options, pooled=True, uid=23456).run()
    try:
        api.kill(container.container_id, signal="SIGKILL")
        api.wait(container.container_id)
        delivery = program_delivery("python", "print('never')", time_limit=3.0)
        outcome = await execute(api, container, delivery, time_limit=3.0, output_limit=1024)
    finally:
        discard_container(api, container)
    assert outcome.never_started
    assert outcome.stdout.text() == ""


MARK = b"\x1eabc123:"


@pytest.mark.parametrize(
    ("frames", "stdout", "stderr", "status"),
    [
        pytest.param(
            [_frame(1, b".no newline" + MARK + b"0\n"), _frame(2, b"err" + MARK + b"0\n")],
            "no newline",
            "err",
            0,
            id="clean-exit",
        ),
        pytest.param(
            [_frame(1, b"." + MARK[:3]), _frame(1, MARK[3:] + b"3\n"), _frame(2, MARK + b"3\n")],
            "",
            "",
            3,
            id="mark-split-across-frames",
        ),
        pytest.param(
            [_frame(1, b".out" + MARK + b"0\n")],
            "out",
            "",
            None,
            id="stderr-trailer-missing",
        ),
        pytest.param(
            [_frame(1, b".\x1eabc12:0\n"), _frame(2, b"\x1e")],
            "\x1eabc12:0\n",
            "\x1e",
            None,
            id="almost-a-mark-is-output",
        ),
    ],
)
def test_the_exit_status_trailer_is_taken_off_both_streams(
    frames: list[bytes], stdout: str, stderr: str, status: int | None
) -> None:
    streams = Demultiplexer(
        CappedBuffer(100), CappedBuffer(100), acknowledgement=ACKNOWLEDGEMENT, trailer_mark=MARK
    )
    for frame in frames:
        streams.feed(frame)
    assert streams.exit_status == status
    streams.finish()
    assert (streams.stdout.text(), streams.stderr.text()) == (stdout, stderr)
