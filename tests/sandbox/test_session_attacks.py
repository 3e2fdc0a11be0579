"""Hostile cells in a session: each is contained, the session tells the truth and goes on."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import AsyncIterator

import docker
import pytest

from sandcrew.sandbox import DockerSandbox, SandboxConfig, Session, SessionLimits
from tests.sandbox.helpers import our_containers

pytestmark = [pytest.mark.docker, pytest.mark.slow]

LIMITS = SessionLimits(cell_timeout=10, interrupt_grace=3)


@pytest.fixture
async def session(sandbox: DockerSandbox) -> AsyncIterator[Session]:
    async with sandbox.session(limits=LIMITS) as started:
        yield started


async def test_frames_forged_on_stdout_and_stderr_are_plain_output(session: Session) -> None:
    code = r"""
import os, sys
fake = "\x1e" + "0" * 32 + ' end 52\n{"seq": 1, "timed_out": true, "state_lost": true}'
print(fake)
print(fake, file=sys.stderr)
os.write(1, b"\x1e ready 2\n{}")
print()
print("after")
"""
    result = await session.run(code)
    after = await session.run("print('next')")

    assert result.ok, result
    assert result.stdout.startswith("\x1e" + "0" * 32 + " end 52\n")
    assert result.stdout.endswith("\x1e ready 2\n{}\nafter\n")
    assert "state_lost" in result.stderr
    assert after.stdout == "next\n"


async def test_a_result_forged_on_the_channel_for_another_cell_is_ignored(
    session: Session,
) -> None:
    code = r"""
import json, os, time
body = json.dumps({"seq": 999, "count": 77, "error": None}).encode()
os.write(4, b"r" + len(body).to_bytes(4, "big") + body)
time.sleep(0.3)
print("ran to the end")
"""
    result = await session.run(code)

    assert result.stdout == "ran to the end\n"
    assert result.execution_count == 1


async def test_a_broken_channel_costs_the_state_and_nothing_else(session: Session) -> None:
    await session.run("x = 1")
    broken = await session.run("import os\nos.write(4, b'garbage that is no message')")
    after = await session.run("print(globals().get('x'), 'works')")

    assert broken.state_lost
    assert broken.reason is not None
    assert "broke its channel" in broken.reason
    assert after.stdout == "None works\n"


async def test_an_output_flood_keeps_the_host_bounded(docker_client: docker.DockerClient) -> None:
    config = SandboxConfig(max_output_bytes=256 * 1024)
    limits = SessionLimits(cell_timeout=3, interrupt_grace=3, max_display_bytes=256 * 1024)
    async with (
        DockerSandbox(config, docker_client=docker_client) as sandbox,
        sandbox.session(limits=limits) as session,
    ):
        tracemalloc.start()
        try:
            printed = await session.run("import os\nwhile True:\n    os.write(1, b'x' * 65536)")
            shown = await session.run(
                "from IPython.display import HTML, display\n"
                "while True:\n    display(HTML('y' * 50_000))"
            )
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        after = await session.run("print('calm')")

    assert printed.timed_out
    assert printed.stdout_truncated
    assert len(printed.stdout) == 256 * 1024
    assert shown.timed_out
    assert shown.outputs_truncated
    assert sum(len(output.data["text/html"]) for output in shown.outputs) <= 256 * 1024
    assert peak < 16 * 1024 * 1024
    assert after.stdout == "calm\n"


async def test_a_fork_bomb_is_ended_and_another_session_is_unaffected(
    sandbox: DockerSandbox,
) -> None:
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    async with sandbox.session(limits=LIMITS) as attacked, sandbox.session(limits=LIMITS) as other:
        bombed, neighbour = await asyncio.gather(
            attacked.run(bomb, timeout=2),
            other.run("import time\ntime.sleep(1)\nprint(sum(range(10)))"),
        )
        after = await attacked.run("import subprocess\nprint(subprocess.run(['true']).returncode)")

    # An interrupt that lands in Python's at-fork callbacks is dropped (logging has
    # some), so a cell that forks in a loop may outlast its grace and lose the state.
    assert bombed.timed_out
    assert neighbour.stdout == "45\n"
    assert after.stdout == "0\n"


async def test_the_supervisor_cannot_be_signalled_traced_or_read(session: Session) -> None:
    code = r"""
import ctypes, os, signal
supervisor = os.getppid()
seen = []
for number in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP):
    try:
        os.kill(supervisor, number)
        seen.append("sent")
    except PermissionError:
        seen.append("refused")
libc = ctypes.CDLL(None, use_errno=True)
seen.append(libc.ptrace(16, supervisor, 0, 0))  # PTRACE_ATTACH
for name in ("mem", "environ", "fd/1", "cmdline"):
    try:
        with open(f"/proc/{supervisor}/{name}", "rb") as handle:
            handle.read(1)
        seen.append(name)
    except OSError:
        seen.append("refused")
print(seen)
"""
    result = await session.run(code)
    after = await session.run("print('still served')")

    # cmdline is public (it holds no secret: the nonce never travels in argv).
    expected = ["refused"] * 3 + [-1] + ["refused"] * 3 + ["cmdline"]
    assert result.stdout == f"{expected}\n"
    assert after.stdout == "still served\n"


async def test_killing_every_process_it_may_loses_only_the_interpreter(session: Session) -> None:
    await session.run("x = 1")
    killed = await session.run(
        "import os, signal\nos.kill(-1, signal.SIGKILL)\nos.kill(os.getpid(), signal.SIGKILL)"
    )
    after = await session.run("print(globals().get('x'), 'fresh')")

    assert killed.state_lost
    assert killed.reason is not None
    assert "signal 9" in killed.reason
    assert after.stdout == "None fresh\n"


async def test_closed_or_non_blocking_streams_do_not_break_the_session(session: Session) -> None:
    blocking = await session.run(
        "import os\nfor fd in (1, 2, 3, 4):\n    os.set_blocking(fd, False)\nprint('z' * 300_000)"
    )
    closed = await session.run("import os\nos.close(1)\nos.close(2)")
    after = await session.run("import sys\nprint('back')\nprint('err', file=sys.stderr)")

    assert not blocking.state_lost
    assert not closed.state_lost
    assert (after.stdout, after.stderr) == ("back\n", "err\n")


async def test_closing_the_channel_ends_the_interpreter_not_the_session(session: Session) -> None:
    await session.run("x = 1")
    closed = await session.run("import os\nos.close(4)")
    commands_closed = await session.run("import os\nos.close(3)")
    after = await session.run("print('ran')")
    final = await session.run("print(globals().get('x'), 'fresh')")

    assert closed.state_lost
    assert closed.reason is not None
    # Which the supervisor sees first, the closed channel or the driver's exit, is a race;
    # either way the truth is told: the interpreter is gone and a fresh one took its place.
    assert "closed its channel" in closed.reason or "a fresh one started" in closed.reason
    assert commands_closed.ok
    # The driver could not read the next cell: it died, and the next cell says so.
    assert after.state_lost
    assert final.stdout == "None fresh\n"


async def test_setsid_daemons_do_not_outlive_the_session(
    sandbox: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    daemon = (
        "import os, subprocess, sys\n"
        "program = 'import os, time\\nos.setsid()\\nwhile True:\\n"
        '    print(chr(30) + "daemon", flush=True)\\n    time.sleep(0.05)\'\n'
        "subprocess.Popen([sys.executable, '-c', program])\n"
        "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        import time\n        time.sleep(3600)\n    os._exit(0)\n"
    )
    async with sandbox.session(limits=LIMITS) as session:
        started = await session.run(daemon)
        later = await session.run("import time\ntime.sleep(0.3)\nprint('mine')")
        assert len(our_containers(docker_client)) == 1

    assert started.ok
    assert "mine\n" in later.stdout
    assert "\x1edaemon\n" in later.stdout
    assert our_containers(docker_client) == []


async def test_filling_the_disk_is_reported_and_the_session_goes_on(session: Session) -> None:
    await session.put_file("small.txt", b"kept")
    code = """
import errno
count = 0
try:
    while True:
        with open(f"fill-{count}", "wb") as handle:
            for _ in range(8):
                handle.write(b"x" * (1 << 20))
        count += 1
except OSError as error:
    print(errno.errorcode[error.errno], count > 0)
"""
    filled = await session.run(code)
    after = await session.run(
        "import glob, os\nfor name in glob.glob('fill-*'):\n    os.remove(name)\nprint('room')"
    )

    assert filled.stdout == "ENOSPC True\n"
    assert await session.get_file("small.txt") == b"kept"
    assert after.stdout == "room\n"
