"""SandcrewSessionExecutor on the session test double (real autogen-core, no Docker): blocks
as cells, exit codes, display outputs saved as files, the timeout note, cancellation and
the restart. The real container is proven by test_autogen_session_executor.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from autogen_agentchat.agents import CodeExecutorAgent
from autogen_agentchat.messages import TextMessage
from autogen_core import CancellationToken
from autogen_core.code_executor import CodeBlock

from sandcrew.core import UserError
from sandcrew.integrations.autogen import SandcrewSessionExecutor
from sandcrew.sandbox import CellError, DisplayOutput, SandboxConfig, SessionLimits
from sandcrew.testing import ScriptedCell, ScriptedSandbox, ScriptedSession
from tests.frameworks.test_autogen_executor import approve

PNG = b"\x89PNG\r\n\x1a\nscripted figure"
ERROR = CellError(
    name="ZeroDivisionError",
    value="division by zero",
    traceback="Traceback (most recent call last):\nZeroDivisionError: division by zero",
)


def executor_on(
    *sessions: ScriptedSession, tmp_path: Path, cell_timeout: float = 30.0
) -> tuple[SandcrewSessionExecutor, ScriptedSandbox]:
    sandbox = ScriptedSandbox({}, sessions=sessions)
    executor = SandcrewSessionExecutor(
        sandbox=sandbox,
        limits=SessionLimits(cell_timeout=cell_timeout),
        output_dir=tmp_path / "out",
    )
    return executor, sandbox


def python(*codes: str) -> list[CodeBlock]:
    return [CodeBlock(code=code, language="python") for code in codes]


async def test_blocks_run_as_cells_of_one_session_in_order(tmp_path: Path) -> None:
    session = ScriptedSession(
        [
            ScriptedCell(stdout="set\n"),
            ScriptedCell(outputs=(DisplayOutput(kind="result", data={"text/plain": "42"}),)),
            ScriptedCell(stdout="again\n"),
        ]
    )
    executor, sandbox = executor_on(session, tmp_path=tmp_path)
    async with executor:
        both = await executor.execute_code_blocks(python("x = 41", "x + 1"), CancellationToken())
        later = await executor.execute_code_blocks(python("print('again')"), CancellationToken())

    assert (both.exit_code, both.output) == (0, "set\n\n42\n")
    assert (later.exit_code, later.output) == (0, "again\n")
    assert [cell.code for cell in session.ran] == ["x = 41", "x + 1", "print('again')"]
    assert sandbox.sessions_opened == [session]
    assert session.limits.cell_timeout == 30.0
    assert session.closed
    assert sandbox.closed
    session.assert_complete()


async def test_the_first_failing_block_ends_the_call_with_its_exit_code(tmp_path: Path) -> None:
    session = ScriptedSession([ScriptedCell(stdout="before\n"), ScriptedCell(error=ERROR)])
    executor, _ = executor_on(session, tmp_path=tmp_path)
    async with executor:
        failed = await executor.execute_code_blocks(
            python("print('before')", "1 / 0", "print('never')"), CancellationToken()
        )

    assert failed.exit_code == 1
    assert failed.output == f"before\n\n{ERROR.traceback}\n"
    assert [cell.code for cell in session.ran] == ["print('before')", "1 / 0"]


async def test_a_timed_out_block_is_124_with_autogen_s_timeout_note(tmp_path: Path) -> None:
    session = ScriptedSession([ScriptedCell(stdout="spinning\n", timed_out=True)])
    executor, _ = executor_on(session, tmp_path=tmp_path, cell_timeout=3)
    async with executor:
        endless = await executor.execute_code_blocks(
            python("while True: pass"), CancellationToken()
        )

    assert endless.exit_code == 124
    assert endless.output == "spinning\nTimeout (the cell ran longer than 3s)\n"


async def test_a_lost_state_is_a_failure_that_says_so(tmp_path: Path) -> None:
    session = ScriptedSession([ScriptedCell(state_lost=True, reason="killed: out of memory")])
    executor, _ = executor_on(session, tmp_path=tmp_path)
    async with executor:
        lost = await executor.execute_code_blocks(python("x = ' ' * 10**12"), CancellationToken())

    assert lost.exit_code == 1
    assert "[the interpreter was restarted: killed: out of memory;" in lost.output


async def test_images_and_html_are_saved_as_files_and_text_is_shown(tmp_path: Path) -> None:
    figure = DisplayOutput(kind="display", data={"image/png": PNG, "text/plain": "<Figure>"})
    page = DisplayOutput(kind="display", data={"text/html": "<b>table</b>", "text/plain": "t"})
    value = DisplayOutput(kind="result", data={"text/plain": "'done'"})
    session = ScriptedSession([ScriptedCell(stdout="plotting\n", outputs=(figure, page, value))])
    executor, _ = executor_on(session, tmp_path=tmp_path)
    async with executor:
        result = await executor.execute_code_blocks(python("plot()"), CancellationToken())

    png, html = result.output_files
    assert (png.suffix, png.parent, png.read_bytes()) == (".png", tmp_path / "out", PNG)
    assert (html.suffix, html.read_text()) == (".html", "<b>table</b>")
    assert result.output == (
        f"plotting\nimage/png saved to {png}\ntext/html saved to {html}\n'done'\n"
    )


async def test_a_block_in_another_language_is_refused_without_a_cell(tmp_path: Path) -> None:
    session = ScriptedSession([])
    executor, _ = executor_on(session, tmp_path=tmp_path)
    async with executor:
        refused = await executor.execute_code_blocks(
            [CodeBlock(code="echo hi", language="bash")], CancellationToken()
        )

    assert refused.exit_code == 1
    assert refused.output == "Unsupported language 'bash': this executor runs python"
    assert session.ran == []


async def test_a_cancelled_call_interrupts_the_cell(tmp_path: Path) -> None:
    session = ScriptedSession([])
    executor, _ = executor_on(session, tmp_path=tmp_path)
    token = CancellationToken()
    token.cancel()
    async with executor:
        with pytest.raises(asyncio.CancelledError):
            await executor.execute_code_blocks(python("import time; time.sleep(30)"), token)

    assert session.interrupts == 1


async def test_restart_and_an_ended_session(tmp_path: Path) -> None:
    first = ScriptedSession([ScriptedCell(), ScriptedCell()])
    second = ScriptedSession([ScriptedCell(stdout="fresh\n")])
    executor, sandbox = executor_on(first, second, tmp_path=tmp_path)
    async with executor:
        await executor.execute_code_blocks(python("kept = 1"), CancellationToken())
        await executor.restart()
        await executor.execute_code_blocks(python("kept = 2"), CancellationToken())
        await first.close()  # as its idle limit or a lost container would end it
        after = await executor.execute_code_blocks(python("print('fresh')"), CancellationToken())

    assert first.restarts == 1
    assert sandbox.sessions_opened == [first, second]
    assert after.output == "fresh\n"
    assert second.closed


async def test_autogen_s_code_executor_agent_answers_with_the_cell_s_output(
    tmp_path: Path,
) -> None:
    session = ScriptedSession({"table['b'].sum()": ScriptedCell(stdout="42\n")})
    executor, _ = executor_on(session, tmp_path=tmp_path)
    async with executor:
        agent = CodeExecutorAgent("runner", code_executor=executor, approval_func=approve)
        message = TextMessage(
            content="Next step:\n```python\nprint(int(table['b'].sum() * 7))\n```", source="coder"
        )
        response = await agent.on_messages([message], CancellationToken())

    assert isinstance(response.chat_message, TextMessage)
    assert response.chat_message.content == "42\n"
    assert session.ran[0].code == "print(int(table['b'].sum() * 7))\n"


def test_a_config_and_a_sandbox_are_alternatives_and_only_a_config_is_declarative() -> None:
    scripted = ScriptedSandbox({})
    with pytest.raises(UserError, match="config or a sandbox"):
        SandcrewSessionExecutor(SandboxConfig(), sandbox=scripted)
    with pytest.raises(UserError, match="no declarative form"):
        SandcrewSessionExecutor(sandbox=scripted).dump_component()

    made = SandcrewSessionExecutor(SandboxConfig(timeout=7), limits=SessionLimits(cell_timeout=5))
    loaded = SandcrewSessionExecutor.load_component(made.dump_component())
    assert isinstance(loaded, SandcrewSessionExecutor)
    assert loaded.dump_component() == made.dump_component()
    assert '"timeout":7.0' in made.dump_component().model_dump_json()
