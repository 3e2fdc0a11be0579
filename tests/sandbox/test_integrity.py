"""The product cannot be lied to: hostile programs against the exit status, the deadline,
the host's memory, shared kernel limits, the seccomp surface and crash safety."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import docker.errors
import pytest
import requests

from sandcrew.sandbox import DockerSandbox, ExecutionResult, SandboxConfig, SandboxError, _container
from sandcrew.sandbox._container import is_removal_race, remove_container, security_options
from sandcrew.sandbox._deadlines import WATCHDOG_GRACE
from sandcrew.sandbox._labels import container_labels
from sandcrew.sandbox._seccomp import ALLOWED_SYSCALLS, DENIED_SYSCALLS, seccomp_profile
from sandcrew.sandbox.host import reap_orphans
from tests.sandbox.conftest import IMAGE
from tests.sandbox.helpers import (
    our_containers,
    process_alive,
    python_process,
    removed_soon,
)

pytestmark = pytest.mark.docker

# --- item 1: the exit status comes from a source the program cannot write -------------

FORGER = r"""
import ctypes, os, re, signal, sys
parent = os.getppid()
found = set()
for what in ("mem", "environ", "cmdline", "maps", "fd/0", "status"):
    try:
        with open(f"/proc/{parent}/{what}", "rb") as handle:
            data = handle.read(1 << 20)
        found.update(re.findall(rb"[0-9a-f]{32}", data))
        print(what, "read")
    except OSError as exc:
        print(what, exc.strerror)
libc = ctypes.CDLL(None, use_errno=True)
# PTRACE_ATTACH (16) to the supervisor, and process_vm_readv of its memory.
print("ptrace", libc.ptrace(16, parent, 0, 0), ctypes.get_errno())
print("process_vm_readv", libc.syscall(310, parent, 0, 0, 0, 0, 0), ctypes.get_errno())
try:
    os.kill(parent, signal.SIGKILL)
    print("killed the supervisor")
except OSError as exc:
    print("kill", exc.strerror)
# Whatever could be found, and plain guesses: forge a trailer reporting success.
guesses = sorted(found) + [b"0" * 32, b"x"]
for nonce in guesses:
    line = b"\x1e" + nonce + b":0\n"
    sys.stdout.buffer.write(line)
    sys.stderr.buffer.write(line)
sys.stdout.flush()
sys.stderr.flush()
sys.exit(3)
"""


async def test_a_forged_trailer_cannot_change_the_exit_code(sandbox: DockerSandbox) -> None:
    result = await sandbox.run(FORGER)

    assert result.exit_code == 3, result
    assert not result.ok
    lines = result.stdout.split("\n")  # not splitlines(): it splits at \x1e too
    assert lines[:2] == ["mem Permission denied", "environ Permission denied"]
    assert "ptrace -1 1" in lines  # EPERM
    assert "process_vm_readv -1 1" in lines
    assert "kill Operation not permitted" in lines
    # The forgeries are the program's output, kept whole.
    assert "\x1e" + "0" * 32 + ":0" in lines
    assert "\x1ex:0" in result.stderr.split("\n")


async def test_a_forged_success_does_not_pass_in_bash(sandbox: DockerSandbox) -> None:
    code = "printf '\\036%s:0\\n' $(cat /proc/$PPID/environ 2>/dev/null | tr -d '\\0') x\nexit 7"
    result = await sandbox.run(code, "bash")
    assert result.exit_code == 7, result


# --- items 2 and 6: the deadline holds, the watchdog is out of reach -------------------

WATCHDOG_KILLER = r"""
import os, signal, sys, time
for pid in (os.getppid(), 1):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError as exc:
        print("kill", pid, exc.strerror)
for stream in (sys.stdout, sys.stderr):
    stream.write("\x1e" + "f" * 32 + ":137\n")
    stream.flush()
while True:
    time.sleep(1)
"""


@pytest.mark.parametrize("pool_size", [0, 1], ids=["cold", "pooled"])
async def test_a_killed_watchdog_and_a_forged_137_do_not_defeat_the_deadline(
    docker_client: docker.DockerClient, pool_size: int
) -> None:
    config = SandboxConfig(timeout=3.0, pool_size=pool_size)
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        started = time.monotonic()
        result = await sandbox.run(WATCHDOG_KILLER)
        elapsed = time.monotonic() - started

    assert result.timed_out, result
    assert result.exit_code == 124
    assert not result.oom_killed
    assert config.timeout <= result.duration <= config.timeout + 1, result.duration
    # Ended by the host's own deadline (the program loops for ever): the launch of a cold
    # container on a busy shared engine comes on top of the run's time.
    assert elapsed < config.timeout + 60
    assert "kill 1 Operation not permitted" in result.stdout


_HOSTILE_ABANDONED_RUN = f"""
from sandcrew.sandbox import DockerSandbox
DockerSandbox().run_sync({WATCHDOG_KILLER!r}, timeout=2)
"""


async def test_a_watchdog_the_program_tried_to_kill_still_ends_an_abandoned_container(
    docker_client: docker.DockerClient,
) -> None:
    with python_process(_HOSTILE_ABANDONED_RUN) as owner:
        container_id = await _running_container_of(docker_client, owner)
        await asyncio.sleep(1.0)  # the program has tried to kill its supervisor by now
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    try:
        give_up = time.monotonic() + 2 + WATCHDOG_GRACE + 3
        while _running(docker_client, container_id):
            assert time.monotonic() < give_up, "the container outlived its watchdog"
            await asyncio.sleep(0.2)
    finally:
        _remove_quietly(docker_client, container_id)


# --- item 3: bounded host memory after a trailer mark ----------------------------------

_STREAM_AFTER_A_MARK = """
import resource
from sandcrew.sandbox._streams import CappedBuffer, Demultiplexer

def frame(kind, payload):
    return bytes([kind, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload

def peak_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

mark = b"\\x1e" + b"a" * 32 + b":"
streams = Demultiplexer(CappedBuffer(1 << 20), CappedBuffer(1 << 20), acknowledgement=b".",
                        trailer_mark=mark)
chunk = frame(1, b"z" * 65536)
before = peak_kib()
streams.feed(frame(1, b"." + mark))
for _ in range(200 * 16):  # 200 MiB after the mark, no newline
    streams.feed(chunk)
streams.feed(frame(2, b"y" * 65536 + mark + b"0\\n"))
streams.finish()
print(before, peak_kib(), len(streams.stdout.data), streams.exit_status)
"""


def test_200_mb_after_a_trailer_mark_keeps_host_memory_bounded() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", _STREAM_AFTER_A_MARK],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    before, peak, kept, status = completed.stdout.split()
    before_kib, peak_kib = int(before), int(peak)
    # KiB: the two caps (2 MiB) and some slack, for 200 MiB that went through.
    assert peak_kib - before_kib < 16 * 1024, (before_kib, peak_kib)
    assert int(kept) <= 1 << 20
    assert status == "None"  # a mark followed by no status is no trailer


# --- item 9: each run its own uid ------------------------------------------------------

INOTIFY_HOG = r"""
import ctypes, errno, os, time
libc = ctypes.CDLL(None, use_errno=True)
held = []
while True:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    held.append(fd)
print(os.getuid(), len(held), errno.errorcode[ctypes.get_errno()], flush=True)
time.sleep(4)
"""

INOTIFY_USER = r"""
import ctypes, os, time
time.sleep(1.5)
libc = ctypes.CDLL(None, use_errno=True)
print(os.getuid(), "inotify", libc.inotify_init1(0) >= 0)
"""


MAX_USER_INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")


async def test_one_run_exhausting_inotify_leaves_another_run_unaffected(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(timeout=10.0)
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        hog, user = await asyncio.gather(sandbox.run(INOTIFY_HOG), sandbox.run(INOTIFY_USER))

    hog_uid, count, error = hog.stdout.split()
    user_uid, _, works = user.stdout.split()
    max_instances = int(MAX_USER_INSTANCES.read_text())  # noqa: ASYNC240 - a /proc file
    assert (int(count), error) == (max_instances, "EMFILE"), hog
    assert works == "True", user
    assert hog_uid != user_uid
    for uid in (hog_uid, user_uid):
        assert 20000 <= int(uid) <= 59999


async def test_a_fixed_user_is_still_possible(docker_client: docker.DockerClient) -> None:
    config = SandboxConfig(user="12345:23456")
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        result = await sandbox.run("import os\nprint(os.getuid(), os.getgid(), os.getgroups())")
    assert result.stdout == "12345 23456 []\n"


# --- item 7: our own seccomp profile ---------------------------------------------------

SURFACE = r"""
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
# x86-64 numbers; each call gets harmless arguments and must be refused with EPERM.
calls = {
    "io_uring_setup": (425, 8, ctypes.create_string_buffer(120)),
    "io_uring_enter": (426, 0, 0, 0, 0, 0),
    "ptrace": (101, 0, 0, 0, 0),
    "process_vm_readv": (310, 1, 0, 0, 0, 0, 0),
    "bpf": (321, 0, 0, 0),
    "userfaultfd": (323, 0),
    "perf_event_open": (298, 0, 0, -1, -1, 0),
    "keyctl": (250, 0, 0),
    "unshare": (272, 0x10000000),
    "setns": (308, 0, 0),
    "mount": (165, 0, 0, 0, 0, 0),
    "kexec_load": (246, 0, 0, 0, 0),
    "clone_newuser": (56, 0x10000000 | 17, 0, 0, 0, 0),
}
for name, (number, *arguments) in calls.items():
    result = libc.syscall(number, *arguments)
    print(name, "allowed" if result >= 0 else errno.errorcode[ctypes.get_errno()])
"""


async def test_the_seccomp_profile_refuses_the_dangerous_calls(sandbox: DockerSandbox) -> None:
    result = await sandbox.run(SURFACE)
    outcomes = dict(line.split() for line in result.stdout.splitlines())
    assert outcomes == dict.fromkeys(outcomes, "EPERM"), outcomes
    assert len(outcomes) == 13


def test_the_profile_allows_none_of_the_denied_calls() -> None:
    profile = seccomp_profile()
    allowed = {name for rule in profile["syscalls"] for name in rule["names"]}
    assert not allowed & set(DENIED_SYSCALLS)
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    (clone,) = [rule for rule in profile["syscalls"] if rule["names"] == ["clone"]]
    assert clone["args"][0]["op"] == "SCMP_CMP_MASKED_EQ"
    assert len(ALLOWED_SYSCALLS) == len(set(ALLOWED_SYSCALLS))


def test_the_profile_is_a_setting(tmp_path: Path) -> None:
    assert any(option.startswith("seccomp=") for option in security_options(SandboxConfig()) or [])
    engine = security_options(SandboxConfig(seccomp_profile="engine-default"))
    assert engine == ["no-new-privileges:true"]
    custom = tmp_path / "profile.json"
    custom.write_text(json.dumps({"defaultAction": "SCMP_ACT_ALLOW"}))
    options = security_options(SandboxConfig(seccomp_profile=str(custom))) or []
    assert options[1] == 'seccomp={"defaultAction":"SCMP_ACT_ALLOW"}'


async def test_the_engine_default_profile_can_be_chosen(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(seccomp_profile="engine-default")
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        result = await sandbox.run("print(open('/proc/self/status').read().count('Seccomp:\\t2'))")
    assert result.stdout == "1\n"  # still filtered, by the engine's own profile


# --- item 6: crash safety ---------------------------------------------------------------


async def test_sigterm_to_sandcrew_run_leaves_no_container(
    docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    program = tmp_path / "sleep.py"
    program.write_text("import time\ntime.sleep(60)\n")
    sandcrew = Path(sys.executable).with_name("sandcrew")
    process = subprocess.Popen(  # noqa: ASYNC220 - watched from this loop while it runs
        [str(sandcrew), "run", str(program), "--timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        await _running_container_of(docker_client, process)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) != 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
    assert our_containers(docker_client, owner_pid=process.pid) == []


def test_a_zombie_owner_counts_as_dead(docker_client: docker.DockerClient) -> None:
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    while process_alive(zombie.pid):
        time.sleep(0.05)  # exited, not yet waited for: a zombie
    labels = container_labels(
        run_id="zombie-owner", created_at=time.time(), deadline=time.time() + 600
    )
    labels["sandcrew.owner-pid"] = str(zombie.pid)
    container_id = docker_client.api.create_container(IMAGE, ["true"], labels=labels)["Id"]
    try:
        reap_orphans(docker_client)
        assert removed_soon(docker_client, container_id)
    finally:
        zombie.wait()
        _remove_quietly(docker_client, container_id)


def test_engine_races_during_removal_are_recognised() -> None:
    message = "Could not kill running container 3f2a, cannot remove - Container 3f2a is not running"
    assert is_removal_race(docker.errors.APIError("500 Server Error", explanation=message))
    in_progress = "removal of container 3f2a is already in progress"
    assert is_removal_race(docker.errors.APIError("409", explanation=in_progress))
    assert not is_removal_race(docker.errors.APIError("500", explanation="driver failed"))


class _EngineStillRemoving:
    """The engine's side of a removal it is making itself (an auto-removed container's) that
    takes ``seconds``: a busy engine's pace, which it cannot be made to keep on demand."""

    def __init__(self, seconds: float) -> None:
        self.gone_at = time.monotonic() + seconds

    def remove_container(self, name: str, *, force: bool, v: bool) -> None:
        if time.monotonic() < self.gone_at:
            raise docker.errors.APIError(
                "409 Client Error: Conflict",
                explanation=f"removal of container {name} is already in progress",
            )
        raise docker.errors.NotFound(f"No such container: {name}")

    def wait(self, name: str, *, timeout: float, condition: str) -> dict[str, int]:
        assert condition == "removed"
        left = self.gone_at - time.monotonic()
        if left > timeout:
            time.sleep(timeout)
            raise requests.exceptions.ConnectionError("Read timed out.")
        time.sleep(max(left, 0.0))
        return {"StatusCode": 137}


def test_a_removal_the_engine_is_making_is_waited_for_until_the_container_is_gone() -> None:
    engine = _EngineStillRemoving(3.0)  # longer than the few retries this once made
    remove_container(engine, "busy")  # type: ignore[arg-type]
    assert time.monotonic() >= engine.gone_at


def test_a_removal_that_never_ends_is_an_error_not_a_silent_return(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_container, "REMOVAL_WAIT_SECONDS", 0.5)
    with pytest.raises(SandboxError, match="still removing the sandbox container stuck"):
        remove_container(_EngineStillRemoving(60.0), "stuck")  # type: ignore[arg-type]


async def test_close_does_not_raise_when_the_engine_removes_containers_at_the_same_time(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(timeout=3.0, pool_size=4)
    for _ in range(3):
        sandbox = DockerSandbox(config, docker_client=docker_client)
        await sandbox.start()
        await sandbox.run("print(1)")
        others = our_containers(docker_client)
        removing = [
            asyncio.to_thread(_remove_quietly, docker_client, container_id)
            for container_id in others
        ]
        await asyncio.gather(sandbox.aclose(), *removing)
    assert our_containers(docker_client) == []


# --- a pooled soak -------------------------------------------------------------------


@pytest.mark.slow
async def test_a_100_run_pooled_soak_gives_every_right_result(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(timeout=10.0, pool_size=2)
    slots = asyncio.Semaphore(4)

    async def one(index: int) -> ExecutionResult:
        async with slots:
            code = f"import sys\nprint({index} * {index})\nsys.exit({index % 7})"
            return await sandbox.run(code)

    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        results = await asyncio.gather(*(one(index) for index in range(100)))

    wrong = [
        (index, result)
        for index, result in enumerate(results)
        if (result.stdout, result.exit_code, result.timed_out)
        != (f"{index * index}\n", index % 7, False)
    ]
    assert wrong == []
    assert len({result.run_id for result in results}) == 100
    assert our_containers(docker_client) == []


# --- helpers ---------------------------------------------------------------------------


async def _running_container_of(
    client: docker.DockerClient, process: subprocess.Popen[bytes]
) -> str:
    for _ in range(400):
        for container_id in our_containers(client, owner_pid=process.pid):
            if _running(client, container_id):
                return container_id
        assert process.poll() is None, f"the sandcrew process ended early: {process.returncode}"
        await asyncio.sleep(0.05)
    raise AssertionError("the run's container never started")


def _running(client: docker.DockerClient, container_id: str) -> bool:
    try:
        return bool(client.api.inspect_container(container_id)["State"]["Running"])
    except docker.errors.NotFound:
        return False


def _remove_quietly(client: docker.DockerClient, container_id: str) -> None:
    # Gone already, or being removed by its owner.
    with contextlib.suppress(docker.errors.APIError):
        client.api.remove_container(container_id, force=True)
