"""ScriptedSession: the Session test double front ends are tested on (no Docker).

It answers cells from a script, keeps files by the session's rules and refuses what a
real session refuses, so that a front end's test on it fails where the front end is wrong.
"""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path

import pytest

from sandcrew.core import UserError
from sandcrew.errors import EmptyCodeError, SessionFileError, SessionFileNotFoundError
from sandcrew.sandbox import (
    CellError,
    CellResult,
    CommandResult,
    DisplayOutput,
    OutputEvent,
    SandboxWithSessions,
    Session,
    SessionClosedError,
    SessionLimits,
    SupportsSessions,
)
from sandcrew.testing import (
    RecordedCell,
    RecordedCommand,
    ScriptedCell,
    ScriptedCommand,
    ScriptedSandbox,
    ScriptedSession,
)

PLOT = DisplayOutput(kind="display", data={"image/png": b"\x89PNG-ish", "text/plain": "<Figure>"})
SEVEN = DisplayOutput(kind="result", data={"text/plain": "7"})


async def started(session: ScriptedSession) -> ScriptedSession:
    return await session.start()


def test_it_satisfies_the_session_protocols() -> None:
    assert isinstance(ScriptedSession(), Session)
    assert isinstance(ScriptedSandbox({}), SupportsSessions)
    assert isinstance(ScriptedSandbox({}), SandboxWithSessions)


async def test_cells_are_answered_in_order_and_recorded() -> None:
    session = await started(
        ScriptedSession([ScriptedCell(stdout="one\n"), ScriptedCell(outputs=(SEVEN,))])
    )
    first = await session.run("print('one')", timeout=5)
    second = await session.run("3 + 4", context="side")

    assert (first.stdout, first.execution_count, first.exit_code) == ("one\n", 1, 0)
    assert second.shown() == ["7"]
    assert second.execution_count == 2
    assert session.execution_count == 2
    assert session.ran == [
        RecordedCell("print('one')", 5, None),
        RecordedCell("3 + 4", None, "side"),
    ]
    session.assert_complete()


async def test_cells_are_answered_by_the_first_marker_their_code_holds() -> None:
    session = await started(
        ScriptedSession({"load()": ScriptedCell(stdout="loaded\n"), "1 / 0": ScriptedCell()})
    )
    # Any order, and a marker may answer more than once.
    again = [await session.run("data = load()") for _ in range(2)]
    await session.run("1 / 0")

    assert [result.stdout for result in again] == ["loaded\n", "loaded\n"]
    session.assert_complete()


async def test_a_cell_streams_its_output_then_its_display_outputs_then_its_result() -> None:
    session = await started(
        ScriptedSession([ScriptedCell(stdout="out\n", stderr="warn\n", outputs=(PLOT, SEVEN))])
    )
    events = [event async for event in session.stream("plot()")]

    assert events[:4] == [
        OutputEvent(stream="stdout", text="out\n"),
        OutputEvent(stream="stderr", text="warn\n"),
        PLOT,
        SEVEN,
    ]
    assert isinstance(events[4], CellResult)
    assert events[4].outputs == [PLOT, SEVEN]
    assert len(events) == 5


async def test_run_tells_the_output_to_sync_and_async_callbacks() -> None:
    session = await started(
        ScriptedSession([ScriptedCell(stdout="a\n", stderr="b\n"), ScriptedCell(stdout="c\n")])
    )
    told: list[tuple[str, str]] = []

    async def later(event: OutputEvent) -> None:
        told.append((event.stream, event.text))

    await session.run("first", on_output=lambda event: told.append((event.stream, event.text)))
    await session.run("second", on_output=later)

    assert told == [("stdout", "a\n"), ("stderr", "b\n"), ("stdout", "c\n")]


async def test_outcomes_follow_the_one_exit_code_rule_and_a_lost_state_resets_the_count() -> None:
    error = CellError(name="ZeroDivisionError", value="division by zero", traceback="Trace...")
    session = await started(
        ScriptedSession(
            [
                ScriptedCell(stdout="x\n"),
                ScriptedCell(timed_out=True),
                ScriptedCell(error=error),
                ScriptedCell(state_lost=True, reason="killed: out of memory"),
                ScriptedCell(stdout="fresh\n"),
            ]
        )
    )
    results = [await session.run(f"cell {number}") for number in range(5)]

    assert [result.exit_code for result in results] == [0, 124, 1, 1, 0]
    assert results[2].error == error
    # A fresh interpreter counts from one again; the lost cell has no count of its own.
    assert [result.execution_count for result in results] == [1, 2, 3, None, 1]


async def test_a_stream_left_before_its_result_counts_an_interrupt_only_when_asked() -> None:
    session = await started(ScriptedSession([ScriptedCell(stdout="out\n")] * 3))
    for asked, left in ((True, True), (False, True), (True, False)):
        events = session.stream("cell", interrupt_if_abandoned=asked)
        async with contextlib.aclosing(events):
            async for event in events:
                if left:
                    break
                assert isinstance(event, OutputEvent | CellResult)
    assert session.interrupts == 1


async def test_restart_gives_a_fresh_count_and_interrupts_are_counted() -> None:
    session = await started(ScriptedSession([ScriptedCell(), ScriptedCell(), ScriptedCell()]))
    await session.run("a")
    await session.run("b")
    await session.interrupt()
    await session.restart()
    after = await session.run("c")

    assert (session.interrupts, session.restarts) == (1, 1)
    assert after.execution_count == 1


async def test_assert_complete_fails_while_a_scripted_cell_was_never_run() -> None:
    in_order = await started(ScriptedSession([ScriptedCell(), ScriptedCell()]))
    await in_order.run("first")
    by_marker = await started(ScriptedSession({"used": ScriptedCell(), "never": ScriptedCell()}))
    await by_marker.run("used()")

    with pytest.raises(AssertionError, match="1 scripted cells never run"):
        in_order.assert_complete()
    with pytest.raises(AssertionError, match="never"):
        by_marker.assert_complete()


async def test_an_unscripted_cell_fails_the_run_and_assert_complete_even_when_caught() -> None:
    in_order = await started(ScriptedSession([ScriptedCell()]))
    await in_order.run("scripted")
    by_marker = await started(ScriptedSession({"known()": ScriptedCell()}))
    await by_marker.run("known()")

    # A front end may catch what a cell raises (a tool server turns it into a refusal):
    # the test still fails at assert_complete.
    with pytest.raises(AssertionError, match="ran out of scripted cells"):
        await in_order.run("one more")
    with pytest.raises(AssertionError, match="no cell for this code"):
        await by_marker.run("other()")

    for session, code in ((in_order, "one more"), (by_marker, "other()")):
        with pytest.raises(AssertionError, match="unscripted") as failure:
            session.assert_complete()
        assert code in str(failure.value)


async def test_files_by_relative_and_absolute_names_inside_the_work_folder(
    tmp_path: Path,
) -> None:
    session = await started(ScriptedSession(workdir="/home/work"))
    await session.put_file("data/in.csv", b"a,b\n")
    await session.put_file("/home/work/data/more.csv", b"c\n")
    (tmp_path / "folder" / "deep").mkdir(parents=True)
    (tmp_path / "folder" / "top.txt").write_text("top")
    (tmp_path / "folder" / "deep" / "low.txt").write_text("low")
    (tmp_path / "single.txt").write_text("single")
    await session.put_file("from-host", tmp_path / "folder")
    await session.put_file("one.txt", tmp_path / "single.txt")

    assert await session.get_file("/home/work/data/in.csv") == b"a,b\n"
    assert await session.get_file("data/more.csv") == b"c\n"
    assert await session.get_file("from-host/deep/low.txt") == b"low"
    assert await session.get_file("one.txt") == b"single"
    listed = await session.list_files("/home/work")
    assert [(entry.name, entry.kind) for entry in listed] == [
        ("data", "folder"),
        ("from-host", "folder"),
        ("one.txt", "file"),
    ]
    assert [(entry.name, entry.size) for entry in await session.list_files("data")] == [
        ("in.csv", 4),
        ("more.csv", 2),
    ]


@pytest.mark.parametrize(
    "name", ["/etc/passwd", "/home/work/../etc/passwd", "/home/workshop/x", "../x", "a/./b", "a//b"]
)
async def test_a_path_outside_the_work_folder_or_with_dots_is_refused(name: str) -> None:
    session = await started(ScriptedSession(workdir="/home/work"))
    with pytest.raises(UserError, match=r"refused|outside"):
        await session.put_file(name, b"x")
    with pytest.raises(UserError, match=r"refused|outside"):
        await session.get_file(name)
    assert session.files == {}


async def test_missing_files_and_oversized_ones_are_refused() -> None:
    session = await started(ScriptedSession(limits=SessionLimits(max_file_bytes=4)))
    await session.put_file("small", b"1234")

    with pytest.raises(SessionFileNotFoundError, match="missing"):
        await session.get_file("missing")
    with pytest.raises(SessionFileNotFoundError):
        await session.remove_file("missing")
    with pytest.raises(SessionFileNotFoundError):
        await session.rename_file("missing", "elsewhere")
    with pytest.raises(UserError, match="max_file_bytes"):
        await session.put_file("large", b"12345")
    with pytest.raises(SessionFileError, match="larger than 2 bytes"):
        await session.get_file("small", max_bytes=2)
    assert await session.stat_file("missing") is None
    assert list(session.files) == ["small"]


async def test_folders_made_moved_and_removed() -> None:
    session = await started(ScriptedSession())
    assert await session.make_dir("made/inner") is True
    assert await session.make_dir("made/inner") is False
    await session.put_file("made/file.txt", b"abc")
    await session.rename_file("made/file.txt", "moved/renamed.txt")

    inner = await session.list_files("made")
    stat = await session.stat_file("moved/renamed.txt")
    await session.remove_file("made")

    assert [(entry.name, entry.kind) for entry in inner] == [("inner", "folder")]
    assert stat is not None
    assert (stat.name, stat.kind, stat.size) == ("renamed.txt", "file", 3)
    assert await session.stat_file("made/inner") is None
    assert [entry.name for entry in await session.list_files()] == ["moved"]


async def test_commands_are_answered_by_marker_and_recorded() -> None:
    session = await started(
        ScriptedSession(
            commands={
                "ls": ScriptedCommand(stdout="a.txt\n"),
                "grep": ScriptedCommand(exit_code=1, stderr="no\n"),
                "sleep": ScriptedCommand(timed_out=True, signal=signal.SIGKILL),
            }
        )
    )
    listed = await session.run_command("ls -1", env={"LANG": "C"}, cwd="data", timeout=5)
    running = await session.start_command("grep nothing")
    events = [event async for event in running.events()]
    slept = await session.run_command("sleep 100", timeout=1)
    await running.kill(signal.SIGTERM)

    assert (listed.exit_code, listed.stdout) == (0, "a.txt\n")
    assert events[0] == OutputEvent(stream="stderr", text="no\n")
    assert isinstance(events[1], CommandResult)
    assert events[1].exit_code == 1
    assert (slept.timed_out, slept.signal) == (True, signal.SIGKILL)
    assert running.signals == [signal.SIGTERM]
    assert session.commands_run == [
        RecordedCommand("ls -1", {"LANG": "C"}, "data", 5),
        RecordedCommand("grep nothing", None, None, None),
        RecordedCommand("sleep 100", None, None, 1),
    ]
    session.assert_complete()


async def test_an_unscripted_or_unused_command_fails_the_test() -> None:
    session = await started(ScriptedSession(commands={"ls": ScriptedCommand()}))
    with pytest.raises(AssertionError, match="no command for"):
        await session.run_command("rm -rf data")
    with pytest.raises(AssertionError, match="rm -rf data"):
        session.assert_complete()

    unused = await started(ScriptedSession(commands={"ls": ScriptedCommand()}))
    with pytest.raises(AssertionError, match="ls"):
        unused.assert_complete()


async def test_what_a_real_session_refuses_is_refused() -> None:
    session = await started(ScriptedSession([ScriptedCell()], language="bash"))
    with pytest.raises(EmptyCodeError):
        await session.run("   ")
    with pytest.raises(UserError, match="no contexts"):
        await session.run("echo", context="other")
    with pytest.raises(UserError, match="timeout"):
        await session.run("echo", timeout=0)
    with pytest.raises(EmptyCodeError):
        await session.run_command(" ")
    assert session.ran == []


async def test_a_closed_session_refuses_everything_and_closes_twice() -> None:
    session = await started(ScriptedSession([ScriptedCell()], commands={"ls": ScriptedCommand()}))
    await session.put_file("kept", b"1")
    await session.close()
    await session.close()

    for request in (
        session.run("print(1)"),
        session.get_file("kept"),
        session.put_file("new", b"2"),
        session.list_files(),
        session.stat_file("kept"),
        session.remove_file("kept"),
        session.make_dir("folder"),
        session.run_command("ls"),
        session.interrupt(),
        session.restart(),
    ):
        with pytest.raises(SessionClosedError, match="closed"):
            await request
    assert session.closed
    assert session.ran == []


async def test_a_cell_may_end_the_session_as_an_expiry_would() -> None:
    session = await started(
        ScriptedSession([ScriptedCell(stdout="last\n", ends_session="idle for 600s")])
    )
    last = await session.run("print('last')")

    assert last.stdout == "last\n"
    assert session.closed
    with pytest.raises(SessionClosedError, match="The session ended: idle for 600s"):
        await session.run("print('after')")
    await session.close()
    with pytest.raises(SessionClosedError, match="idle for 600s"):
        await session.get_file("anything")


async def test_a_session_used_before_it_started_fails_the_test() -> None:
    session = ScriptedSession([ScriptedCell()])
    with pytest.raises(AssertionError, match="before start"):
        await session.run("print(1)")
    with pytest.raises(AssertionError, match="before start"):
        await session.put_file("a", b"")


async def test_the_scripted_sandbox_hands_out_its_sessions_in_order() -> None:
    first, second = ScriptedSession(), ScriptedSession()
    sandbox = ScriptedSandbox({}, sessions=[first, second])
    limits = SessionLimits(cell_timeout=3)

    got_first = sandbox.session("bash", image="custom", limits=limits)
    got_second = sandbox.session()

    assert got_first is first
    assert got_second is second
    assert (first.language, first.image, first.limits) == ("bash", "custom", limits)
    assert second.language == "python"
    assert [id(opened) for opened in sandbox.sessions_opened] == [id(first), id(second)]
    with pytest.raises(AssertionError, match="no more scripted sessions"):
        sandbox.session()
