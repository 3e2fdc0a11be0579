"""SandcrewSessionFactory on the session test double (the real ag2 package, no Docker): each
exec is a command beside the interpreter, 124 on timeout, files put and removed in the
session, one session for every open. The real container is proven by
test_ag2_session_sandbox.py."""

from __future__ import annotations

import signal
from pathlib import PurePosixPath

import pytest
from ag2.tools.sandbox import CodeAdapter, Sandbox, SandboxFactory, WorkdirAware

from sandcrew.integrations.ag2 import SandcrewSessionFactory
from sandcrew.sandbox import SandboxConfig
from sandcrew.testing import RecordedCommand, ScriptedCommand, ScriptedSandbox, ScriptedSession

SETTINGS = SandboxConfig(timeout=9, workdir="/home/work")


def factory_on(*sessions: ScriptedSession) -> tuple[SandcrewSessionFactory, ScriptedSandbox]:
    sandbox = ScriptedSandbox({}, sessions=sessions)
    return SandcrewSessionFactory(SETTINGS, sandbox=sandbox), sandbox


async def test_exec_is_a_command_of_the_session_and_its_result_ag2_s() -> None:
    session = ScriptedSession(
        workdir="/home/work",
        commands={
            "python3 -c": ScriptedCommand(stdout="out\n", stderr="err\n"),
            "exit 3": ScriptedCommand(exit_code=3, stdout="failing\n"),
            "no-such-command": ScriptedCommand(exit_code=127, stderr="not found\n"),
        },
    )
    factory, _ = factory_on(session)
    async with factory, factory.open() as sandbox:
        assert isinstance(sandbox, Sandbox)
        ran = await sandbox.exec(["python", "-c", "print('out')"], env={"GREETING": "hi"})
        failed = await sandbox.exec(["sh", "-c", "echo failing; exit 3"], timeout=2)
        missing = await sandbox.exec(["no-such-command"])
        empty = await sandbox.exec([])

    assert (ran.output, ran.exit_code) == ("out\nerr", 0)
    assert (failed.output, failed.exit_code) == ("failing", 3)
    assert missing.exit_code == 127
    assert empty.exit_code == 2
    # AG2 calls Python `python`; the images have python3. No limit given: the settings'.
    assert session.commands_run == [
        RecordedCommand("python3 -c 'print('\"'\"'out'\"'\"')'", {"GREETING": "hi"}, None, 9),
        RecordedCommand("sh -c 'echo failing; exit 3'", {}, None, 2),
        RecordedCommand("no-such-command", {}, None, 9),
    ]
    assert sandbox.workdir == PurePosixPath("/home/work")
    session.assert_complete()


async def test_a_command_ended_by_its_time_limit_is_124_with_a_note() -> None:
    session = ScriptedSession(
        commands={"sleep": ScriptedCommand(stdout="begun\n", timed_out=True, signal=signal.SIGKILL)}
    )
    factory, _ = factory_on(session)
    async with factory, factory.open() as sandbox:
        slow = await sandbox.exec(["sleep", "30"], timeout=1)

    assert (slow.output, slow.exit_code) == ("begun\nExecution timed out after 1s", 124)


async def test_a_bad_variable_name_is_refused_before_any_command() -> None:
    session = ScriptedSession()
    factory, _ = factory_on(session)
    async with factory, factory.open() as sandbox:
        with pytest.raises(ValueError, match="letters, digits and _"):
            await sandbox.exec(["env"], env={"A-B": "x"})

    assert session.commands_run == []


async def test_files_are_put_into_and_removed_from_the_session() -> None:
    session = ScriptedSession(workdir="/home/work")
    factory, _ = factory_on(session)
    async with factory, factory.open() as sandbox:
        await sandbox.put_file(PurePosixPath("data/input.bin"), b"forty-two\x00\xff")
        await sandbox.put_file(PurePosixPath("gone.txt"), b"x")
        await sandbox.remove_file(PurePosixPath("gone.txt"))
        await sandbox.remove_file(PurePosixPath("never-there.txt"))
        with pytest.raises(ValueError, match="relative"):
            await sandbox.put_file(PurePosixPath("/etc/passwd"), b"root")
        with pytest.raises(ValueError, match="relative"):
            await sandbox.put_file(PurePosixPath("../escape"), b"x")

    assert session.files == {"data/input.bin": b"forty-two\x00\xff"}


async def test_every_open_yields_the_one_session_until_it_ends() -> None:
    first = ScriptedSession(commands={"true": ScriptedCommand()})
    second = ScriptedSession(commands={"true": ScriptedCommand()})
    factory, sandbox = factory_on(first, second)
    async with factory:
        assert isinstance(factory, SandboxFactory)
        assert isinstance(factory, WorkdirAware)
        assert factory.workdir == PurePosixPath("/home/work")
        async with factory.open() as one, factory.open() as again:
            await one.exec(["true"])
        await first.close()  # as its idle limit or a lost container would end it
        async with factory.open() as fresh:
            await fresh.exec(["true"])

    assert one is again
    assert fresh is not one
    assert sandbox.sessions_opened == [first, second]
    assert second.closed
    assert sandbox.closed


async def test_ag2_s_code_adapter_runs_python_and_javascript_through_it() -> None:
    session = ScriptedSession(
        workdir="/home/work",
        commands={
            "python3 -c": ScriptedCommand(stdout="42\n"),
            "node /home/work/ag2_": ScriptedCommand(stdout="js\n"),
        },
    )
    factory, _ = factory_on(session)
    adapter = CodeAdapter(factory, languages=("python", "javascript"))
    async with factory:
        python = await adapter.run("print(6 * 7)", "python")
        javascript = await adapter.run("console.log('js')", "javascript")

    assert (python.output, python.exit_code) == ("42", 0)
    assert (javascript.output, javascript.exit_code) == ("js", 0)
    # The script file AG2 put for node was removed again.
    assert session.files == {}
    session.assert_complete()
