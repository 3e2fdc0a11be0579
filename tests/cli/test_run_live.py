"""`sandcrew run` shows the program's output as it comes: on a terminal (made safe) and piped.

Liveness is shown without timing: the program prints, then waits until the test lets
it end, which the test does only once the line is on the screen.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_terminal import HOSTILE_OUTPUT, assert_nothing_obeyed, plain
from tests.process import cli_on_terminal, run_cli
from tests.sandbox.helpers import WAITS_FOR_RELEASE, release_program, shared_client

pytestmark = pytest.mark.docker

FORGED_TRAILER = "\x1e" + "f" * 32 + ":0\n"
HOSTILE_THEN_WAITS = (
    "import sys\n"
    f"sys.stdout.write({HOSTILE_OUTPUT!r} + {FORGED_TRAILER!r})\n"
    "sys.stdout.flush()\n"
    f"sys.stderr.write({HOSTILE_OUTPUT!r})\n"
    "sys.stderr.flush()\n"
    f"{WAITS_FOR_RELEASE}"
    "sys.exit(3)\n"
)


def program(tmp_path: Path, text: str) -> str:
    path = tmp_path / "program.py"
    path.write_text(text)
    return str(path)


def test_lines_reach_the_terminal_while_the_program_runs(tmp_path: Path) -> None:
    source = program(tmp_path, WAITS_FOR_RELEASE)
    with cli_on_terminal("run", source, "--timeout", "60") as terminal:
        terminal.read_until(b"waiting\r\n")
        release_program(shared_client(), owner_pid=terminal.child.pid)
        terminal.read_until(b"released\r\n")
        assert terminal.finish() == 0
    screen = plain(bytes(terminal.received))
    assert screen.startswith("waiting\nreleased\n")
    assert "exit 0" in screen


def test_hostile_output_is_shown_not_obeyed_as_it_comes(tmp_path: Path) -> None:
    source = program(tmp_path, HOSTILE_THEN_WAITS)
    with cli_on_terminal("run", source, "--timeout", "60") as terminal:
        before_release = terminal.read_until(b"waiting\r\n")
        assert_nothing_obeyed(before_release)
        release_program(shared_client(), owner_pid=terminal.child.pid)
        assert terminal.finish() == 3
    screen = bytes(terminal.received)
    assert_nothing_obeyed(screen)
    # The forged trailer is text; the real one is never shown.
    assert plain(screen).count("^^" + "f" * 32 + ":0\n") == 1
    assert "\x1e" not in plain(screen)
    assert "exit 3" in plain(screen)


def test_piped_output_comes_as_it_is_written_and_exact(tmp_path: Path) -> None:
    source = program(tmp_path, HOSTILE_THEN_WAITS)
    with subprocess.Popen(
        [sys.executable, "-m", "sandcrew", "run", source, "--timeout", "60"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as child:
        assert child.stdout is not None
        first = b""
        while not first.endswith(b"waiting\n"):
            piece = child.stdout.read1(65536)
            assert piece, f"stdout ended before the line came: {first!r}"
            first += piece
        release_program(shared_client(), owner_pid=child.pid)
        rest, errors = child.communicate(timeout=120)
    assert child.returncode == 3
    stdout = (first + rest).decode()
    assert stdout == HOSTILE_OUTPUT + FORGED_TRAILER + "waiting\nreleased\n"
    assert errors.decode().startswith(HOSTILE_OUTPUT)


def test_a_flood_stops_at_the_output_cap(tmp_path: Path) -> None:
    flood = "import os\nfor _ in range(400):\n    os.write(1, b'x' * 65536)\n"
    completed = run_cli("run", program(tmp_path, flood))
    assert completed.returncode == 0
    assert completed.stdout == "x" * (1024 * 1024)
    assert "stdout truncated" in completed.stderr


def test_json_prints_one_exact_document_at_the_end(tmp_path: Path) -> None:
    hostile = (
        f"import sys\nsys.stdout.write({HOSTILE_OUTPUT!r} + {FORGED_TRAILER!r})\nsys.exit(3)\n"
    )
    completed = run_cli("run", "--json", program(tmp_path, hostile))
    assert completed.returncode == 3
    document = json.loads(completed.stdout)  # nothing before or after it
    assert document["stdout"] == HOSTILE_OUTPUT + FORGED_TRAILER
    assert document["exit_code"] == 3
