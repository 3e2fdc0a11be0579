"""Program and model text on a real terminal: shown, never obeyed; exact in JSON and files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sandcrew.cli._output import json_text
from sandcrew.cli._terminal import visible_controls
from sandcrew.testing import ScriptedModelServer
from tests.crew.conftest import admin_final_turn, coder_turn, review_turn
from tests.process import run_cli, run_cli_in_terminal

# What a hostile program prints: a window title (OSC 0), the clipboard set to
# `rm -rf ~` (OSC 52), a link whose target is hidden (OSC 8), a cleared screen,
# a C1 control sequence introducer, and a fake status line followed by
# "conceal" so that the real status line would be invisible.
HOSTILE_OUTPUT = (
    "\x1b]0;pwned title\x07"
    "\x1b]52;c;cm0gLXJmIH4=\x07"
    "\x1b]8;;https://evil.example/\x1b\\click me\x1b]8;;\x1b\\\n"
    "\x1b[2J"
    "\u009b31mC1 red\n"
    "exit 0 · 0.01s · sandcrew/python:latest\n"
    "\x1b[8m"
)
HOSTILE_PROGRAM = (
    "import sys\n"
    f"sys.stdout.write({HOSTILE_OUTPUT!r})\n"
    "sys.stdout.flush()\n"
    f"sys.stderr.write({HOSTILE_OUTPUT!r})\n"
    "sys.exit(3)\n"
)
# Our own styling is SGR (ESC [ ... m), and a live progress display hides the
# cursor, moves it up and erases lines; nothing else may reach the terminal.
_SGR = re.compile(rb"\x1b\[([0-9;]*)m")
_OUR_CONTROLS = re.compile(rb"\x1b\[(?:[0-9;]*m|\?25[lh]|2K|[0-9]*[AG])")
_C1_IN_UTF8 = re.compile(rb"\xc2[\x80-\x9f]")


SHOWN = ("^[]0;pwned title^G", "^[]52;c;cm0gLXJmIH4=^G", "^[[2J", "<U+009B>31m")


def assert_nothing_obeyed(screen: bytes, *, shown: tuple[str, ...] = SHOWN) -> None:
    """Only our own styling and cursor moves reach the terminal; none of it conceals text."""
    without_ours = _OUR_CONTROLS.sub(b"", screen)
    assert b"\x1b" not in without_ours, screen
    assert not _C1_IN_UTF8.search(screen), screen
    for match in _SGR.finditer(screen):
        assert b"8" not in match.group(1).split(b";"), f"conceal in {match.group()!r}"
    # The program's sequences are shown as text instead.
    text = without_ours.decode()
    for visible in shown:
        assert visible in text


def plain(screen: bytes) -> str:
    return _OUR_CONTROLS.sub(b"", screen).decode().replace("\r\n", "\n")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b[31mred\x1b[0m", "^[[31mred^[[0m"),
        ("bell\x07 nul\x00 del\x7f", "bell^G nul^@ del^?"),
        ("\u009b2J \u0085", "<U+009B>2J <U+0085>"),
        ("keep\ttabs\nand lines\n", "keep\ttabs\nand lines\n"),
        ("windows\r\nline", "windows\nline"),
        ("FAIL\rPASS", "FAIL^MPASS"),
        ("ünïcødé ✓ 中文", "ünïcødé ✓ 中文"),
    ],
    ids=["csi", "c0", "c1", "newline-tab", "crlf", "lone-cr", "printable"],
)
def test_visible_controls(text: str, shown: str) -> None:
    assert visible_controls(text) == shown


def test_json_text_escapes_every_control_and_keeps_the_text() -> None:
    text = "esc\x1b del\x7f csi\u009b2J nel\u0085 ünïcødé 中文"
    shown = json_text({"text": text})
    assert not any(ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 for char in shown)
    assert "ünïcødé 中文" in shown
    assert json.loads(shown) == {"text": text}


@pytest.mark.docker
def test_run_shows_hostile_output_and_a_visible_status_line(tmp_path: Path) -> None:
    program = tmp_path / "hostile.py"
    program.write_text(HOSTILE_PROGRAM)

    returncode, screen = run_cli_in_terminal("run", str(program))

    assert returncode == 3
    assert_nothing_obeyed(screen)
    lines = plain(screen).splitlines()
    # Our status line comes last, after an attribute reset, and tells the truth.
    assert lines[-1].startswith("exit 3 · ")
    status_line = screen[screen.rfind(b"\n", 0, screen.rfind(b"exit 3")) + 1 :]
    assert status_line.startswith(b"\x1b[0m")


@pytest.mark.docker
def test_run_json_and_pipes_keep_the_exact_text(tmp_path: Path) -> None:
    program = tmp_path / "hostile.py"
    program.write_text(HOSTILE_PROGRAM)

    returncode, screen = run_cli_in_terminal("run", str(program), "--json")
    piped = run_cli("run", str(program))

    assert returncode == 3
    assert b"\x1b" not in screen  # JSON escapes C0 control characters itself
    assert not _C1_IN_UTF8.search(screen), screen  # and sandcrew the C1 ones and DEL
    result = json.loads(screen.decode().replace("\r\n", "\n"))
    assert result["stdout"] == HOSTILE_OUTPUT
    assert result["stderr"] == HOSTILE_OUTPUT
    assert piped.returncode == 3
    assert piped.stdout == HOSTILE_OUTPUT


@pytest.mark.docker
def test_solve_runner_panel_and_answer_show_controls(tmp_path: Path) -> None:
    code = f"```python\n{HOSTILE_PROGRAM.replace('sys.exit(3)', 'print(42)')}```"
    transcript = tmp_path / "chat.jsonl"
    with ScriptedModelServer() as server:
        server.add(
            coder_turn(code),
            review_turn(),
            admin_final_turn(answer="42 \x1b]52;c;cm0gLXJmIH4=\x07\x1b[8m"),
        )
        returncode, screen = run_cli_in_terminal(
            "solve",
            "What is 6 times 7?",
            "--base-url",
            server.base_url,
            "--model",
            "scripted",
            "--transcript",
            str(transcript),
        )

    assert returncode == 0, plain(screen)
    assert_nothing_obeyed(screen)
    # While the coder's model call is in flight a status line says so; the reply erases it.
    waiting = screen.index("waiting for coder (model scripted)…".encode())
    assert b"\x1b[2K" in screen[waiting : screen.index(b"Message from coder", waiting)]
    text = plain(screen)
    assert "Message from runner" in text
    assert "answer: The 39th Fibonacci number is 42 ^[]52;c;cm0gLXJmIH4=^G^[[8m." in text
    # The transcript file keeps the exact text.
    records = [json.loads(line) for line in transcript.read_text().splitlines()]
    run = next(record for record in records if record["event"] == "run")
    assert run["run"]["stdout"] == HOSTILE_OUTPUT + "42\n"


@pytest.mark.docker
def test_suite_table_shows_controls_and_the_report_keeps_them(tmp_path: Path) -> None:
    suite = tmp_path / "hostile.yaml"
    suite.write_text(
        "- id: hostile\n"
        "  kind: code\n"
        "  prompt: 'def f():\n'\n"
        "  entry_point: f\n"
        "  test: |\n"
        "    def check(candidate):\n"
        "        assert candidate() == 1\n"
    )
    message = HOSTILE_OUTPUT.replace("\n", " ")
    completions = tmp_path / "completions.jsonl"
    completion = f"    raise ValueError({message!r})\n"
    completions.write_text(json.dumps({"task_id": "hostile", "completion": completion}) + "\n")
    report = tmp_path / "report.json"

    returncode, screen = run_cli_in_terminal(
        "suite",
        "run",
        str(suite),
        "--solver",
        "completions",
        "--completions",
        str(completions),
        "--report",
        str(report),
    )

    assert returncode == 1, plain(screen)
    # The table folds the detail across lines: look for short pieces.
    assert_nothing_obeyed(screen, shown=("ValueError", "^[[2J", "^G"))
    assert "1 task: 0 passed, 1 failed" in plain(screen)
    detail = json.loads(report.read_text())["results"][0]["detail"]
    assert f"ValueError: {message}" in detail


@pytest.mark.docker
def test_an_error_quoting_hostile_text_shows_its_controls() -> None:
    returncode, screen = run_cli_in_terminal("run", "missing\x1b]0;pwned title\x07\x1b[2J.py")

    assert returncode == 125  # `run` follows docker run: sandcrew itself failed
    assert_nothing_obeyed(screen, shown=("^[]0;pwned title^G", "^[[2J"))
    assert "error: no such file: missing^[]0;pwned title^G^[[2J.py" in plain(screen)


HOSTILE_NAME = b"\xff\x1b[2J\x1b]0;TITLE\x1b\\"


@pytest.mark.docker
def test_a_hostile_file_name_is_shown_not_obeyed_in_the_notes(tmp_path: Path) -> None:
    program = tmp_path / "name.py"
    program.write_text(
        "import os\n"
        f"os.close(os.open(b'out/' + {HOSTILE_NAME!r}, os.O_CREAT | os.O_WRONLY))\n"
        f"os.makedirs(b'out/' + {HOSTILE_NAME!r} + b'-folder')\n"
        "open('out/fine.txt', 'w').write('x')\n"
    )

    returncode, screen = run_cli_in_terminal("run", str(program), "--out", str(tmp_path / "out"))

    assert returncode == 0
    assert_nothing_obeyed(screen, shown=("^[[2J^[]0;TITLE^[\\", "the name is not UTF-8"))
    assert "out/fine.txt (1 bytes, text/plain): saved to" in plain(screen)


def test_every_console_of_the_cli_comes_from_the_one_that_shows_controls() -> None:
    cli = Path(__file__).parents[2] / "sandcrew" / "cli"
    makers = {
        path.name
        for path in cli.glob("*.py")
        if re.search(r"\bConsole\(", path.read_text()) and path.name != "_output.py"
    }
    assert makers == set()


def test_log_lines_show_the_controls_of_what_they_quote() -> None:
    import logging

    from sandcrew.cli._terminal import VisibleControlsFormatter

    record = logging.LogRecord(
        "sandcrew.mcp", logging.ERROR, __file__, 1, "run_code failed: %s", ("\x1b[2J",), None
    )

    assert VisibleControlsFormatter("%(message)s").format(record) == "run_code failed: ^[[2J"
