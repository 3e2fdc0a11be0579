"""Runs come and go: one new container each, removed whatever happens; crashes are reaped."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import docker
import docker.errors
import pytest

from sandcrew.errors import ConfigurationError, ImageNotFoundError, UserError
from sandcrew.sandbox import DockerSandbox, ExecutionResult, SandboxConfig, SandboxError
from sandcrew.sandbox._deadlines import WATCHDOG_GRACE
from sandcrew.sandbox._labels import (
    DEADLINE_LABEL,
    OWNER_HOST_LABEL,
    OWNER_PID_LABEL,
    OWNER_STARTED_LABEL,
    container_labels,
    owner_host,
    process_status,
)
from sandcrew.sandbox.host import reap_orphans
from tests.sandbox.conftest import IMAGE
from tests.sandbox.helpers import (
    container_exists,
    our_containers,
    python_process,
    removed_soon,
    wait_until_gone,
)

pytestmark = pytest.mark.docker


async def test_python_run_reports_streams_and_exit_code(sandbox: DockerSandbox) -> None:
    code = "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)\n"
    result = await sandbox.run(code)
    assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err\n", 3)
    assert not result.ok
    assert not result.timed_out
    assert not result.oom_killed
    assert result.language == "python"
    assert result.image == "sandcrew/python:latest"
    assert result.duration > 0


async def test_fibonacci(sandbox: DockerSandbox) -> None:
    code = "a, b = 0, 1\nfor _ in range(39):\n    a, b = b, a + b\nprint(a)\n"
    result = await sandbox.run(code, "py")
    assert result.ok
    assert result.stdout == "63245986\n"
    assert result.to_runner_message() == "[RUNNER_RESULT]\nexit code 0\n63245986"


async def test_uncaught_exception_is_data(sandbox: DockerSandbox) -> None:
    result = await sandbox.run("1 / 0")
    assert result.exit_code == 1
    assert 'File "/workspace/main.py", line 1' in result.stderr
    assert result.stderr.rstrip().endswith("ZeroDivisionError: division by zero")


async def test_every_run_gets_a_new_container(sandbox: DockerSandbox) -> None:
    code = (
        "import os\nprint(os.path.exists('/tmp/marker'))\nopen('/tmp/marker', 'w').close()\n"
        "print(open('/proc/self/cgroup').read().strip().splitlines()[-1])\n"
    )
    first = await sandbox.run(code)
    second = await sandbox.run(code)
    assert first.stdout.splitlines()[0] == second.stdout.splitlines()[0] == "False"
    assert first.stdout.splitlines()[1] != second.stdout.splitlines()[1]
    assert first.run_id != second.run_id


def test_sync_twin(docker_client: docker.DockerClient) -> None:
    with DockerSandbox(SandboxConfig(timeout=3), docker_client=docker_client) as sandbox:
        result = sandbox.run_sync("echo $((6 * 7))", "bash")
        again = sandbox.run_sync("print(6 * 7)")
    assert result.stdout == again.stdout == "42\n"


async def test_run_sync_refuses_inside_an_event_loop() -> None:
    with pytest.raises(UserError, match="running event loop"):
        DockerSandbox().run_sync("print(1)")


async def test_concurrent_runs(sandbox: DockerSandbox) -> None:
    limit = asyncio.Semaphore(4)

    async def one(index: int) -> ExecutionResult:
        async with limit:
            return await sandbox.run(f"print({index} * {index})")

    results = await asyncio.gather(*(one(index) for index in range(20)))
    assert [result.stdout for result in results] == [f"{index * index}\n" for index in range(20)]
    assert len({result.run_id for result in results}) == 20


async def _wait_for_container(
    client: docker.DockerClient,
    owner_pid: int,
    process: subprocess.Popen[bytes] | None = None,
) -> str:
    """The id of the running container of ``owner_pid``, once it runs (a fresh process
    imports sandcrew and starts a cold container: seconds on a busy shared engine)."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        for container_id in our_containers(client, owner_pid=owner_pid):
            try:
                if client.api.inspect_container(container_id)["State"]["Running"]:
                    return container_id
            except docker.errors.NotFound:
                continue
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the sandcrew process ended early: {process.returncode}")
        await asyncio.sleep(0.05)
    raise AssertionError("the run's container never started")


async def test_cancelled_run_removes_its_container(
    docker_client: docker.DockerClient, sandbox: DockerSandbox
) -> None:
    run = asyncio.create_task(sandbox.run("import time\ntime.sleep(60)", timeout=60))
    await _wait_for_container(docker_client, os.getpid())
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert our_containers(docker_client) == []


@pytest.mark.parametrize("delay", [0.0, 0.005, 0.02, 0.05], ids=lambda delay: f"{delay}s")
async def test_run_cancelled_while_its_container_is_created(
    docker_client: docker.DockerClient, sandbox: DockerSandbox, delay: float
) -> None:
    run = asyncio.create_task(sandbox.run("import time\ntime.sleep(60)", timeout=60))
    await asyncio.sleep(delay)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert our_containers(docker_client) == []


async def test_timeout_override_must_be_positive(sandbox: DockerSandbox) -> None:
    with pytest.raises(ConfigurationError, match=r"timeout must be > 0 \(got 0\)"):
        await sandbox.run("print(1)", timeout=0)


async def test_missing_image_names_the_build_command(docker_client: docker.DockerClient) -> None:
    config = SandboxConfig(images={"python": "sandcrew/no-such-image:never"})
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        with pytest.raises(ImageNotFoundError) as caught:
            await sandbox.run("print(1)")
    assert str(caught.value) == (
        "Sandbox image sandcrew/no-such-image:never is missing; sandcrew does not build it: "
        "pull it (`docker pull sandcrew/no-such-image:never`) or build it yourself, or use one "
        "of sandcrew's images (`sandcrew images list` shows them)"
    )
    assert caught.value.__cause__ is None


async def test_unknown_runtime_is_a_sandbox_error(docker_client: docker.DockerClient) -> None:
    config = SandboxConfig(runtime="no-such-runtime")
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        with pytest.raises(SandboxError, match="no-such-runtime"):
            await sandbox.run("print(1)")


async def test_a_client_passed_in_stays_open(docker_client: docker.DockerClient) -> None:
    async with DockerSandbox(docker_client=docker_client) as sandbox:
        assert sandbox.client is docker_client
    assert docker_client.ping()


# --- crash safety -------------------------------------------------------------

_LONG_RUN = """
from sandcrew.sandbox import DockerSandbox
DockerSandbox().run_sync("import time; time.sleep(600)", timeout=600)
"""


@pytest.fixture
def long_run_process() -> Iterator[subprocess.Popen[bytes]]:
    """A separate sandcrew process in the middle of a 10-minute run."""
    with python_process(_LONG_RUN) as process:
        yield process


async def test_process_killed_mid_run_is_reaped_by_the_next_start(
    docker_client: docker.DockerClient, long_run_process: subprocess.Popen[bytes]
) -> None:
    container_id = await _wait_for_container(docker_client, long_run_process.pid, long_run_process)
    long_run_process.send_signal(signal.SIGKILL)
    long_run_process.wait()
    # The owner died without running any cleanup. Judged by the container being gone:
    # another test worker's next start may reap it first.

    await DockerSandbox(docker_client=docker_client).start()

    assert removed_soon(docker_client, container_id)
    assert wait_until_gone(long_run_process.pid) == []


async def test_ctrl_c_removes_the_container(
    docker_client: docker.DockerClient, long_run_process: subprocess.Popen[bytes]
) -> None:
    await _wait_for_container(docker_client, long_run_process.pid, long_run_process)
    long_run_process.send_signal(signal.SIGINT)
    # Well within the program's 10 minutes, and with room for a busy shared engine: CI once
    # saw the engine take over 20 s to remove a container while other tests loaded it.
    assert long_run_process.wait(timeout=90) != 0
    assert long_run_process.stderr is not None
    assert b"KeyboardInterrupt" in long_run_process.stderr.read()
    assert our_containers(docker_client, owner_pid=long_run_process.pid) == []


async def test_reaper_spares_live_runs(
    docker_client: docker.DockerClient, sandbox: DockerSandbox
) -> None:
    run = asyncio.create_task(sandbox.run("import time\ntime.sleep(60)", timeout=60))
    container_id = await _wait_for_container(docker_client, os.getpid())
    assert container_id not in reap_orphans(docker_client)
    assert our_containers(docker_client) == [container_id]
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run


def test_reaper_removes_containers_past_their_deadline_even_if_the_owner_lives(
    docker_client: docker.DockerClient,
) -> None:
    # Owned by this live process, its deadline a few seconds off. Reaped at the real time
    # only: a reap told a later moment would take other tests' live containers as well.
    labels = container_labels(
        run_id="past-deadline", created_at=time.time(), deadline=time.time() + 6
    )
    container_id = docker_client.api.create_container(IMAGE, ["true"], labels=labels)["Id"]
    try:
        assert container_id not in reap_orphans(docker_client)
        assert container_exists(docker_client, container_id)  # no reaper may take it yet

        time.sleep(max(0.0, float(labels[DEADLINE_LABEL]) + 0.5 - time.time()))
        reap_orphans(docker_client)

        assert removed_soon(docker_client, container_id)
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            docker_client.api.remove_container(container_id, force=True)


_ABANDONED_RUN = """
from sandcrew.sandbox import DockerSandbox
DockerSandbox().run_sync("while True:\\n    pass\\n", timeout=2)
"""


async def test_a_container_ends_itself_when_its_owner_is_killed_mid_run(
    docker_client: docker.DockerClient,
) -> None:
    with python_process(_ABANDONED_RUN) as owner:
        container_id = await _wait_for_container(docker_client, owner.pid, owner)
        await asyncio.sleep(1.0)
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    try:
        # The run's 2 s, the watchdog's grace, and some slack for the engine.
        give_up = time.monotonic() + 2 + WATCHDOG_GRACE + 3
        while _running(docker_client, container_id):
            assert time.monotonic() < give_up, "the container outlived its watchdog"
            await asyncio.sleep(0.2)
    finally:
        # Another sandcrew process sharing the engine may reap it meanwhile (its owner is dead).
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            docker_client.api.remove_container(container_id, force=True)


async def test_a_run_ends_at_once_when_its_owner_is_killed_not_at_its_limit(
    docker_client: docker.DockerClient,
) -> None:
    # Another sandcrew process on the engine may kill and remove the orphan before its
    # end is seen (its owner is dead): such a try tells nothing and is made again.
    for _ in range(3):
        exit_code = await _end_of_a_run_whose_owner_is_killed(docker_client)
        if exit_code is not None:
            break
    # 143: the supervisor ended it (not the watchdog's 137, not the limit's 124).
    assert exit_code == 143


async def _end_of_a_run_whose_owner_is_killed(client: docker.DockerClient) -> int | None:
    """The exit code of an orphaned 60-second run's container; ``None`` if another killed it."""
    with python_process(_LONG_RUN) as owner:
        container_id = await _wait_for_container(client, owner.pid, owner)
        await asyncio.sleep(1.5)  # the 60-second program is running
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    try:
        # The engine closes the container's stdin when its owner's connection goes: the
        # supervisor then ends the run, 58 seconds before its limit.
        give_up = time.monotonic() + 15
        while True:
            state = _state(client, container_id)
            if state is None:
                return None
            if not state["Running"]:
                return None if state["ExitCode"] == 137 else int(state["ExitCode"])
            assert time.monotonic() < give_up, "the run went on after its owner died"
            await asyncio.sleep(0.05)
    finally:
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            client.api.remove_container(container_id, force=True)


def _running(client: docker.DockerClient, container_id: str) -> bool:
    state = _state(client, container_id)
    return state is not None and bool(state["Running"])


def _state(client: docker.DockerClient, container_id: str) -> dict[str, Any] | None:
    """The container's state as the engine reports it; ``None`` once it is removed."""
    try:
        return dict(client.api.inspect_container(container_id)["State"])
    except docker.errors.NotFound:
        return None


def test_owners_in_another_pid_namespace_are_not_taken_for_dead(
    docker_client: docker.DockerClient,
) -> None:
    dead_pid = _a_pid_that_does_not_exist()
    hostname = owner_host().split(":")[0]
    created = []
    try:
        for owner in (owner_host(), f"{hostname}:another-boot:another-pidns"):
            labels = container_labels(
                run_id=f"ns-{owner}", created_at=time.time(), deadline=time.time() + 600
            )
            labels[OWNER_PID_LABEL] = str(dead_pid)
            labels[OWNER_HOST_LABEL] = owner
            created.append(docker_client.api.create_container(IMAGE, ["true"], labels=labels)["Id"])
        reap_orphans(docker_client)
        # Same host, same pid namespace, dead pid: orphaned. Another namespace: pids mean
        # nothing here, so only its deadline may end it.
        assert removed_soon(docker_client, created[0])
        assert container_exists(docker_client, created[1])
    finally:
        for container_id in created:
            with contextlib.suppress(docker.errors.NotFound):
                docker_client.api.remove_container(container_id, force=True)


def test_a_dead_owners_pid_given_to_a_newer_process_does_not_keep_its_container(
    docker_client: docker.DockerClient,
) -> None:
    labels = container_labels(run_id="own", created_at=time.time(), deadline=time.time() + 600)
    own_status = process_status(os.getpid())
    assert own_status is not None
    assert labels[OWNER_STARTED_LABEL] == own_status[1]
    # The kernel hands out pids again (32768 of them here): a live process stands in for
    # the newer holder of a dead owner's pid.
    with subprocess.Popen(["sleep", "120"]) as newer:
        newer_status = process_status(newer.pid)
        assert newer_status is not None
        started = int(newer_status[1])
        owners = {
            "dead": {OWNER_STARTED_LABEL: str(started - 1)},  # that pid, an earlier process
            "alive": {OWNER_STARTED_LABEL: str(started)},
            "unknown": {},  # labelled before start times were: judged by the pid alone
        }
        created: dict[str, str] = {}
        try:
            for name, extra in owners.items():
                labels = container_labels(
                    run_id=f"reuse-{name}", created_at=time.time(), deadline=time.time() + 600
                )
                labels.pop(OWNER_STARTED_LABEL, None)
                labels |= {OWNER_PID_LABEL: str(newer.pid), **extra}
                made = docker_client.api.create_container(IMAGE, ["true"], labels=labels)
                created[name] = made["Id"]
            reap_orphans(docker_client)
            assert removed_soon(docker_client, created["dead"])
            assert container_exists(docker_client, created["alive"])
            assert container_exists(docker_client, created["unknown"])
        finally:
            newer.kill()
            for container_id in created.values():
                with contextlib.suppress(docker.errors.NotFound):
                    docker_client.api.remove_container(container_id, force=True)


def _a_pid_that_does_not_exist() -> int:
    pid = 4_000_000
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid += 1
