"""The REPL's cell loop on the session test double (no Docker, no terminal): piped lines
become cells, and what each cell did is shown. The real container and terminal are
proven by test_repl.py."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from sandcrew.cli.repl import run_repl
from sandcrew.sandbox import CellError, DisplayOutput, SessionLimits
from sandcrew.testing import ScriptedCell, ScriptedSandbox, ScriptedSession

PNG = b"\x89PNG\r\n\x1a\nscripted figure"


def piped(
    session: ScriptedSession, cells: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, ScriptedSandbox]:
    """``cells`` piped into a python REPL on ``session``; its exit code and sandbox."""
    numbers = tmp_path / "numbers.txt"
    numbers.write_text("3\n4\n")
    monkeypatch.setattr(sys, "stdin", io.StringIO(cells))
    sandbox = ScriptedSandbox({}, sessions=[session])
    code = run_repl(
        sandbox,
        "python",
        limits=SessionLimits(cell_timeout=3),
        inputs={"numbers.txt": numbers},
        images=tmp_path / "images",
        interactive=False,
    )
    return code, sandbox


def test_piped_lines_become_cells_and_each_cell_s_outcome_is_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    figure = DisplayOutput(kind="display", data={"image/png": PNG, "text/plain": "<Figure>"})
    error = CellError(name="ZeroDivisionError", value="division by zero", traceback="Trace 1/0")
    session = ScriptedSession(
        [
            ScriptedCell(),
            ScriptedCell(outputs=(DisplayOutput(kind="result", data={"text/plain": "14"}),)),
            ScriptedCell(),
            ScriptedCell(stdout="plotting\n", outputs=(figure,)),
            ScriptedCell(outputs=(DisplayOutput(kind="display", data={"text/html": "<b>"}),)),
            ScriptedCell(error=error),
            ScriptedCell(stdout="spinning\n", timed_out=True, duration=3.0),
            ScriptedCell(state_lost=True, reason="killed: out of memory"),
        ]
    )
    cells = (
        "total = sum(numbers)\n"
        "total * 2\n"
        "def double(value):\n"
        "    return value * 2\n"
        "\n"
        "plot()\n"
        "table()\n"
        "1 / 0\n"
        "spin()\n"
        "grow()\n"
    )

    code, sandbox = piped(session, cells, tmp_path, monkeypatch)
    shown = capsys.readouterr()

    assert code == 0
    assert [cell.code for cell in session.ran] == [
        "total = sum(numbers)",
        "total * 2",
        "def double(value):\n    return value * 2\n",
        "plot()",
        "table()",
        "1 / 0",
        "spin()",
        "grow()",
    ]
    assert session.files == {"numbers.txt": b"3\n4\n"}
    assert session.limits.cell_timeout == 3
    assert shown.out == "Out[2]: 14\nplotting\nspinning\n"
    (saved,) = (tmp_path / "images").iterdir()
    assert saved.name.endswith("-cell4-1.png")
    assert saved.read_bytes() == PNG
    assert f"[image saved to {saved}]" in shown.err
    assert "[text/html output not shown in a terminal]" in shown.err
    assert "Trace 1/0" in shown.err
    assert "[the cell reached its limit of 3s]" in shown.err
    assert (
        "[the interpreter was restarted (killed: out of memory): variables are gone, files kept]"
        in shown.err
    )
    # Leaving closes the session, then the sandbox.
    assert session.closed
    assert sandbox.closed
    session.assert_complete()


def test_a_session_that_ended_ends_the_repl_with_exit_code_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    session = ScriptedSession([ScriptedCell(stdout="set\n", ends_session="idle for 600s")])

    code, sandbox = piped(session, "x = 1\nprint(x)\n", tmp_path, monkeypatch)
    shown = capsys.readouterr()

    assert code == 1
    assert shown.out == "set\n"
    assert "The session ended: idle for 600s" in shown.err
    assert [cell.code for cell in session.ran] == ["x = 1"]
    assert sandbox.closed
