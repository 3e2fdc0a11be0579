"""A cell that attacks its own session's channel: malformed or oversized messages, answers forged
for later cells, a shell's status written early. The session stays and tells what it observed."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sandcrew.core import UserError
from sandcrew.crew._session_sandbox import SessionSandbox
from sandcrew.sandbox import DockerSandbox, SandboxConfig, Session, SessionLimits

pytestmark = pytest.mark.docker

LIMITS = SessionLimits(cell_timeout=10, interrupt_grace=2)

# A thread that takes the command socket's place: it keeps a copy, puts an empty pipe on
# descriptor 3, and answers every next command itself ("ok", at once, output of its own).
FORGER = r"""
import json, os, threading
copy = os.dup(3)
empty, _ = os.pipe()
os.dup2(empty, 3)

def read_exactly(size):
    data = b""
    while len(data) < size:
        chunk = os.read(copy, size - len(data))
        if not chunk:
            raise SystemExit
        data += chunk
    return data

def answer():
    while True:
        command = json.loads(read_exactly(int.from_bytes(read_exactly(4), "big")))
        os.write(1, b"forged\n")
        reply = json.dumps({"seq": command["seq"], "count": 99, "error": None}).encode()
        os.write(4, b"r" + len(reply).to_bytes(4, "big") + reply)

threading.Thread(target=answer, daemon=True).start()
"""

# A child process that keeps the interpreter's channel after the cell that made it ended
# (copies made before the fork: a forked child does not keep the channel itself).
FORGING_CHILD = r"""
import json, os
commands, messages = os.dup(3), os.dup(4)
if os.fork() == 0:
    os.setsid()
    while True:
        head = os.read(commands, 4)
        if not head:
            os._exit(0)
        command = json.loads(os.read(commands, int.from_bytes(head, "big")))
        reply = json.dumps({"seq": command["seq"], "count": 99, "error": None}).encode()
        os.write(messages, b"r" + len(reply).to_bytes(4, "big") + reply)
os.close(commands)
os.close(messages)
"""


@pytest.fixture
async def session(sandbox: DockerSandbox) -> AsyncIterator[Session]:
    async with sandbox.session(limits=LIMITS) as started:
        yield started


async def test_deeply_nested_json_on_the_channel_costs_the_state_not_the_session(
    session: Session,
) -> None:
    await session.put_file("kept.txt", b"kept")
    await session.run("x = 1")
    nested = r"""
import os
body = b"[" * 200_000
os.write(4, b"d" + len(body).to_bytes(4, "big") + body)
import time
time.sleep(5)
"""
    broken = await session.run(nested)
    after = await session.run("print(globals().get('x'), open('kept.txt').read())")

    assert broken.state_lost
    assert broken.reason is not None
    assert "broke its channel" in broken.reason
    assert after.ok
    assert after.stdout == "None kept\n"


async def test_nested_values_that_parse_reach_the_host_as_flat_text(session: Session) -> None:
    # Under the parser's depth limit: the supervisor passes on strings only, so nothing
    # nested reaches the host's decoder (nor a count that is not a number).
    code = r"""
import json, os
deep = "[" * 900 + "]" * 900
display = '{"kind": "display", "data": {"text/plain": "shown", "text/html": ' + deep + '}}'
os.write(4, b"d" + len(display).to_bytes(4, "big") + display.encode())
x = 2
"""
    shown = await session.run(code)
    # The second cell of the session: its sequence number is 2.
    forged_error = await session.run(
        "import os\n"
        "deep = '[' * 900 + ']' * 900\n"
        'body = \'{"seq": 2, "count": \' + deep + \', "error": {"name": \' + deep + \'}}\'\n'
        "os.write(4, b'r' + len(body).to_bytes(4, 'big') + body.encode())\n"
        "import time\ntime.sleep(1)"
    )
    after = await session.run("print(x)")

    assert [output.data for output in shown.outputs] == [{"text/plain": "shown"}]
    assert not shown.state_lost
    assert forged_error.execution_count is None
    assert forged_error.error is not None
    assert forged_error.error.name == "Error"
    assert after.stdout == "2\n"


async def test_a_display_over_the_cap_is_dropped_and_the_state_kept(sandbox: DockerSandbox) -> None:
    limits = SessionLimits(cell_timeout=60, max_display_bytes=4 * 1024 * 1024)
    async with sandbox.session(limits=limits) as session:
        code = r"""
import os
from IPython.display import display
x = 7
display({"text/plain": "small"}, raw=True)
display({"image/png": b"\x89PNG\r\n\x1a\n" + os.urandom(5 * 1024 * 1024)}, raw=True)
print("went on")
"""
        shown = await session.run(code)
        # The same, written on the channel by hand past the driver's own check.
        by_hand = await session.run(
            'import os\nbody = b\'{"kind": "display", "data": {"text/plain": "\''
            " + b'y' * (6 * 1024 * 1024) + b'\"}}'\n"
            "os.write(4, b'd' + len(body).to_bytes(4, 'big') + body)\nprint('still here')"
        )
        after = await session.run("print(x)")

    assert shown.ok, shown
    assert not shown.state_lost
    assert shown.outputs_truncated
    assert [output.data for output in shown.outputs] == [{"text/plain": "small"}]
    assert shown.stdout == "went on\n"
    assert by_hand.outputs_truncated
    assert not by_hand.state_lost
    assert by_hand.stdout == "still here\n"
    assert after.stdout == "7\n"


async def test_a_cell_cannot_answer_for_the_cells_after_it(session: Session) -> None:
    await session.run(FORGER)
    looped = await session.run("while True: pass", timeout=2)
    failed = await session.run("raise ValueError('real')")
    printed = await session.run("print('real output')")

    assert looped.timed_out
    assert looped.state_lost
    assert looped.reason is not None
    assert "channel" in looped.reason
    assert "forged" not in looped.stdout
    assert failed.error is not None
    assert failed.error.name == "ValueError"
    assert printed.stdout == "real output\n"


async def test_a_process_left_holding_the_channel_is_found_before_the_next_cell(
    session: Session,
) -> None:
    await session.run("x = 1")
    await session.run(FORGING_CHILD)
    looped = await session.run("while True: pass", timeout=2)
    after = await session.run("print(globals().get('x'))")

    assert looped.timed_out
    assert looped.state_lost
    assert looped.reason is not None
    assert "holds a copy of the channel" in looped.reason
    assert after.stdout == "None\n"


async def test_processes_a_cell_starts_or_forks_cost_no_state(session: Session) -> None:
    await session.run("x = 5")
    pooled = await session.run(
        "import multiprocessing, subprocess\n"
        "pool = multiprocessing.Pool(2)\n"
        "sleeper = subprocess.Popen(['sleep', '60'])\n"
        "print(pool.map(abs, [-1, -2]))"
    )
    again = await session.run("print(pool.map(abs, [-3]), sleeper.poll(), x)")

    assert pooled.stdout == "[1, 2]\n"
    assert not again.state_lost, again.reason
    assert again.stdout == "[3] None 5\n"


async def test_a_forged_cell_is_no_success_for_the_crew_s_session(
    docker_client: object,
) -> None:
    config = SandboxConfig(timeout=2)
    sandbox = SessionSandbox(DockerSandbox(config, docker_client=docker_client))  # type: ignore[arg-type]
    try:
        await sandbox.run(FORGER)
        looped = await sandbox.run("while True: pass")
    finally:
        await sandbox.aclose()

    assert looped.timed_out
    assert looped.exit_code == 124
    assert not looped.ok


async def test_a_bash_cell_cannot_end_itself_by_writing_a_status(sandbox: DockerSandbox) -> None:
    async with sandbox.session("bash", limits=LIMITS) as session:
        early = await session.run(
            "echo 0 >&5; for fd in /proc/self/fd/*; do echo 0 > $fd; done 2>/dev/null; "
            "sleep 1; echo done"
        )
        stolen = await session.run('read line; echo "read: $line"')
        after = await session.run("echo next")

    assert early.stdout.endswith("done\n")
    assert early.duration >= 1
    assert stolen.stdout == "read: \n"
    assert after.stdout == "next\n"


async def test_an_interrupt_the_cell_ignores_ends_the_interpreter_after_the_grace(
    session: Session,
) -> None:
    await session.run("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nx = 1")
    running = asyncio.ensure_future(session.run("while True: pass", timeout=60))
    await asyncio.sleep(1)
    await session.interrupt()
    result = await asyncio.wait_for(running, timeout=LIMITS.interrupt_grace + 10)
    after = await session.run("print(globals().get('x'))")

    assert result.state_lost
    assert not result.timed_out
    assert result.duration < 1 + LIMITS.interrupt_grace + 3
    assert after.stdout == "None\n"


async def test_a_restart_frees_the_shared_memory_the_interpreter_pinned(session: Session) -> None:
    pin = r"""
import ctypes
libc = ctypes.CDLL(None)
libc.shmget.restype = ctypes.c_int
ident = libc.shmget(0, 64 * 1024 * 1024, 0o1600)
assert ident >= 0
print(ident)
"""
    pinned = await session.run(pin)
    await session.restart()
    listing = await session.run("print(open('/proc/sysvipc/shm').read().splitlines()[1:])")

    assert pinned.ok, pinned
    assert listing.stdout == "[]\n"


async def test_special_and_oversized_host_files_are_refused_before_they_are_read(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "small.txt").write_bytes(b"ok")
    with (folder / "big.bin").open("wb") as handle:
        handle.truncate(2 * 1024 * 1024)
    limits = SessionLimits(cell_timeout=10, max_file_bytes=1024 * 1024)
    async with sandbox.session(limits=limits) as session:
        with pytest.raises(UserError, match="not a regular file"):
            await asyncio.wait_for(session.put_file("fifo", fifo), timeout=30)
        with pytest.raises(UserError, match="more than the input limit"):
            await session.put_file("data", folder)
        with pytest.raises(UserError, match="not found"):
            await session.put_file("gone", tmp_path / "missing")
        listed = await session.run("import os\nprint(sorted(os.listdir('.')))")

    assert "fifo" not in listed.stdout
