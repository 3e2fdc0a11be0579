"""Contexts, commands beside the interpreter and file operations of a session, on real Docker."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator

import pytest

from sandcrew.errors import SessionFileError, SessionFileNotFoundError, UserError
from sandcrew.sandbox import CommandResult, DockerSandbox, OutputEvent, Session, SessionLimits

pytestmark = pytest.mark.docker

LIMITS = SessionLimits(cell_timeout=20, interrupt_grace=3)


@pytest.fixture
async def session(sandbox: DockerSandbox) -> AsyncIterator[Session]:
    async with sandbox.session("python", limits=LIMITS) as started:
        yield started


async def test_a_context_is_a_fresh_namespace_that_sees_the_same_files(session: Session) -> None:
    await session.run("x = 'default'\nopen('shared.txt', 'w').write('from default')")
    apart = await session.run(
        "print('x' in dir(), open('shared.txt').read())\nx = 'mine'", context="other"
    )
    kept = await session.run("print(x)", context="other")
    default = await session.run("print(x)")
    await session.reset_context("other")
    reset = await session.run("print('x' in dir())", context="other")
    await session.drop_context("other")
    again = await session.run("print('x' in dir())", context="other")

    assert apart.stdout == "False from default\n"
    assert kept.stdout == "mine\n"
    assert default.stdout == "default\n"
    assert reset.stdout == "False\n"
    assert again.stdout == "False\n"


async def test_contexts_are_python_only(sandbox: DockerSandbox) -> None:
    async with sandbox.session("bash", limits=LIMITS) as bash:
        with pytest.raises(UserError, match="no contexts"):
            await bash.run("echo hi", context="other")


async def test_a_command_sees_the_cells_files_and_reports_its_exit(session: Session) -> None:
    await session.run("open('made.txt', 'w').write('by a cell\\n')")
    done = await session.run_command(
        "cat made.txt; echo oops >&2; echo $GREETING > told.txt; exit 3", env={"GREETING": "hello"}
    )
    told = await session.run("print(open('told.txt').read(), end='')")
    where = await session.run_command("pwd", cwd="/workspace")

    assert done == CommandResult(
        id=done.id,
        exit_code=3,
        stdout="by a cell\n",
        stderr="oops\n",
        duration=done.duration,
    )
    assert told.stdout == "hello\n"
    assert where.stdout == "/workspace\n"


async def test_a_command_streams_runs_beside_cells_and_ends_by_signal(session: Session) -> None:
    handle = await session.start_command(
        "for i in 1 2 3; do echo tick $i; sleep 0.3; done; sleep 60"
    )
    events: list[str] = []
    ticked = asyncio.Event()

    async def follow() -> None:
        async for event in handle.events():
            if isinstance(event, OutputEvent):
                events.append(event.text)
                if "".join(events).count("tick") == 3:
                    ticked.set()

    following = asyncio.ensure_future(follow())
    cell = await session.run("print(6 * 7)")  # the command runs on meanwhile
    looped = await session.run("while True: pass", timeout=1)  # ending it spares the command
    await asyncio.wait_for(ticked.wait(), timeout=30)
    await handle.kill(signal.SIGTERM)
    result = await handle.wait()
    await following

    assert cell.stdout == "42\n"
    assert looped.timed_out
    assert not looped.state_lost
    assert "".join(events) == "tick 1\ntick 2\ntick 3\n"
    assert result.signal == signal.SIGTERM
    assert result.exit_code == 128 + signal.SIGTERM


async def test_a_command_past_its_time_limit_is_killed_with_its_children(session: Session) -> None:
    result = await session.run_command("sleep 60 & sleep 60; echo never", timeout=1)
    left = await session.run(
        "import os\nprint(sum(open(f'/proc/{p}/comm').read().strip() == 'sleep' "
        "for p in os.listdir('/proc') if p.isdigit()))"
    )

    assert result.timed_out
    assert result.stdout == ""
    assert left.stdout == "0\n"


async def test_a_command_s_folder_must_be_inside_the_work_folder(session: Session) -> None:
    with pytest.raises(UserError, match="outside the session's work folder"):
        await session.run_command("ls", cwd="/etc")
    with pytest.raises(UserError, match="no code"):
        await session.run_command("   ")


async def test_a_command_s_environment_must_be_one_a_process_can_have(session: Session) -> None:
    for env in ({"": "x"}, {"A=B": "1"}, {"A\0B": "1"}, {"A": "1\0"}):
        with pytest.raises(UserError, match="environment variable"):
            await session.run_command("true", env=env)
    assert (await session.run_command("echo $A", env={"A": "fine"})).stdout == "fine\n"


async def test_file_operations_never_leave_the_work_folder(session: Session) -> None:
    await session.put_file("/workspace/a/b.txt", b"one")
    made = await session.make_dir("a/c")
    made_again = await session.make_dir("a/c")
    await session.rename_file("a/b.txt", "moved/b.txt")
    entry = await session.stat_file("moved/b.txt")
    listed = [item.name for item in await session.list_files("/workspace")]
    await session.run("import os\nos.symlink('/etc/passwd', 'link')")
    link = await session.stat_file("link")
    await session.remove_file("a")
    gone = await session.stat_file("a")
    await session.remove_file("link")
    target = await session.run(
        "import os\nprint(os.path.exists('/etc/passwd'), os.path.lexists('link'))"
    )

    assert made
    assert not made_again
    assert entry is not None
    assert entry.kind == "file"
    assert entry.size == 3
    assert listed == ["a", "moved"]
    assert link is not None
    assert link.kind == "link"
    assert gone is None
    assert target.stdout == "True False\n"
    with pytest.raises(SessionFileNotFoundError):
        await session.get_file("nothing.txt")
    await session.run("import os\nos.symlink('/etc/passwd', 'link')")
    with pytest.raises(SessionFileError, match="link"):
        await session.get_file("link")
    with pytest.raises(UserError, match="outside"):
        await session.get_file("/etc/passwd")
    with pytest.raises(UserError, match="refused"):
        await session.put_file("../escape.txt", b"x")
