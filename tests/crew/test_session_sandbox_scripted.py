"""The crew's SessionSandbox on the session test double (no Docker): Python blocks become
cells, a cell's outcome becomes a run's, input files go in once, other languages run in
the throwaway sandbox, and an ended session is a clear error. The real container is
proven by test_solve_session.py."""

from __future__ import annotations

import pytest

from sandcrew.core import UserError
from sandcrew.crew import SessionSandbox, solve_task
from sandcrew.sandbox import CellError, DisplayOutput, OutputEvent, SandboxConfig
from sandcrew.testing import (
    RecordedCell,
    ScriptedCell,
    ScriptedModelServer,
    ScriptedRun,
    ScriptedSandbox,
    ScriptedSession,
    Turn,
)
from tests.crew.conftest import coder_turn, review_turn, settings_for

MIB = 1024 * 1024
SETTINGS = SandboxConfig(timeout=7, memory_bytes=300 * MIB)


def chat_on(
    session: ScriptedSession, **outcomes: ScriptedRun
) -> tuple[SessionSandbox, ScriptedSandbox]:
    sandbox = ScriptedSandbox(dict(outcomes), sessions=[session])
    return SessionSandbox(sandbox, config=SETTINGS), sandbox


async def test_python_blocks_are_cells_and_their_outcomes_runs() -> None:
    error = CellError(
        name="ZeroDivisionError",
        value="division by zero",
        traceback="Traceback ...\nZeroDivisionError: division by zero",
    )
    session = ScriptedSession(
        [
            ScriptedCell(
                stdout="20\n", outputs=(DisplayOutput(kind="result", data={"text/plain": "21"}),)
            ),
            ScriptedCell(stdout="spinning\n", timed_out=True),
            ScriptedCell(error=error),
            ScriptedCell(state_lost=True, reason="killed: out of memory"),
        ]
    )
    chat, _ = chat_on(session)
    try:
        shown = await chat.run("base = 20\nprint(base)\nbase + 1")
        endless = await chat.run("while True: pass", timeout=3)
        raised = await chat.run("1 / 0")
        lost = await chat.run("big = ' ' * 10**12")
    finally:
        await chat.aclose()

    assert [run.exit_code for run in (shown, endless, raised, lost)] == [0, 124, 1, 1]
    assert (shown.stdout, shown.stderr, shown.language) == ("20\n21\n", "", "python")
    assert endless.timed_out
    assert endless.status == "timed out after 3s"
    assert raised.stderr == "Traceback ...\nZeroDivisionError: division by zero\n"
    assert "[the interpreter was restarted: killed: out of memory;" in lost.stderr
    # The cell limit is the settings' timeout unless the runner gives one.
    assert [cell.timeout for cell in session.ran] == [7, 3, 7, 7]
    assert session.limits.cell_timeout == 7
    assert {(run.timeout, run.memory_limit_bytes) for run in (shown, raised, lost)} == {
        (7, 300 * MIB)
    }
    assert {run.image for run in (shown, endless, raised, lost)} == {session.image}
    session.assert_complete()


async def test_a_cell_s_output_is_told_as_it_comes() -> None:
    session = ScriptedSession([ScriptedCell(stdout="cell\n", stderr="oops\n")])
    chat, _ = chat_on(session)
    told: list[tuple[str, str]] = []

    async def on_output(event: OutputEvent) -> None:
        told.append((event.stream, event.text))

    try:
        await chat.run("print('cell')", on_output=on_output)
    finally:
        await chat.aclose()

    assert told == [("stdout", "cell\n"), ("stderr", "oops\n")]


async def test_input_files_go_into_the_session_once() -> None:
    session = ScriptedSession([ScriptedCell(), ScriptedCell(), ScriptedCell()])
    chat, _ = chat_on(session)
    try:
        await chat.run("first", files={"data.csv": b"1,2\n"})
        session.files["data.csv"] = b"changed by the first cell\n"
        await chat.run("second", files={"data.csv": b"1,2\n"})
        await chat.run("third", files={"data.csv": b"1,2\n", "more.txt": b"new\n"})
    finally:
        await chat.aclose()

    # Put again, the original would undo what the cells did with it.
    assert session.files == {"data.csv": b"changed by the first cell\n", "more.txt": b"new\n"}


async def test_another_language_runs_in_a_throwaway_container_of_the_sandbox() -> None:
    session = ScriptedSession([ScriptedCell(stdout="from the cell\n")])
    chat, sandbox = chat_on(session, **{"echo shell": ScriptedRun(stdout="shell\n")})
    try:
        shell = await chat.run("echo shell", "bash", files={"in.txt": b"x"})
        cell = await chat.run("print('from the cell')")
    finally:
        await chat.aclose()

    assert (shell.stdout, shell.language) == ("shell\n", "bash")
    assert [(run.language, run.code, run.files) for run in sandbox.runs] == [
        ("bash", "echo shell", ("in.txt",))
    ]
    assert session.ran == [RecordedCell("print('from the cell')", 7, None)]
    assert cell.stdout == "from the cell\n"
    assert session.files == {}  # the shell's input file went to its own container


async def test_an_ended_session_is_a_clear_error_and_never_silently_replaced() -> None:
    session = ScriptedSession([ScriptedCell(stdout="defined\n")])
    chat, sandbox = chat_on(session)
    try:
        await chat.run("value = 1")
        await session.close()  # as its idle limit or a lost container would end it
        with pytest.raises(UserError, match="the chat's session has ended"):
            await chat.run("print(value)")
    finally:
        await chat.aclose()

    assert sandbox.sessions_opened == [session]
    assert [cell.code for cell in session.ran] == ["value = 1"]


async def test_closing_it_closes_the_session_then_the_sandbox() -> None:
    session = ScriptedSession([ScriptedCell()])
    chat, sandbox = chat_on(session)
    await chat.run("x = 1")
    await chat.aclose()

    assert session.closed
    assert sandbox.closed


async def test_without_settings_another_sandbox_gets_the_default_limits() -> None:
    session = ScriptedSession([ScriptedCell()])
    chat = SessionSandbox(ScriptedSandbox({}, sessions=[session]))
    try:
        run = await chat.run("x = 1")
    finally:
        await chat.aclose()

    defaults = SandboxConfig()
    assert (run.timeout, run.memory_limit_bytes) == (defaults.timeout, defaults.memory_bytes)
    assert session.ran[0].timeout == defaults.timeout


async def test_the_crew_builds_on_an_earlier_cell_through_its_runner(
    scripted_model_server: ScriptedModelServer,
) -> None:
    session = ScriptedSession(
        {"base = 20": ScriptedCell(stdout="20\n"), "print(base + 22)": ScriptedCell(stdout="42\n")}
    )
    chat, _ = chat_on(session)
    scripted_model_server.add(
        coder_turn("```python\nbase = 20\nprint(base)\n```"),
        review_turn(),
        Turn(agent="admin", contains="[RUNNER_RESULT]", content="Now add 22 to base and print it."),
        coder_turn("```python\nprint(base + 22)\n```"),
        review_turn(),
        Turn(agent="admin", contains="[RUNNER_RESULT]", content="The answer is 42.\n[COMPLETE]"),
    )
    try:
        result = await solve_task(
            "Compute 42 in two steps.", settings_for(scripted_model_server), sandbox=chat
        )
    finally:
        await chat.aclose()

    assert result.solved
    assert [(run.exit_code, run.stdout) for run in result.runs] == [(0, "20\n"), (0, "42\n")]
    assert [cell.code for cell in session.ran] == ["base = 20\nprint(base)\n", "print(base + 22)\n"]
    session.assert_complete()
