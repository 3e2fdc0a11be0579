"""`sandcrew repl` driven through a pseudo-terminal (and a pipe): state kept between cells,
multi-line input, Ctrl-C interrupts a cell and keeps the session, images saved and named,
hostile output shown not obeyed, Ctrl-D and SIGTERM remove the container."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from sandcrew.cli.repl import _save_images
from sandcrew.sandbox import DisplayOutput
from tests.process import cli_on_terminal, run_cli

pytestmark = pytest.mark.docker

START = 240.0
"""Bound on a session's start on a busy machine."""


def tiny_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def test_the_repl_keeps_state_interrupts_cells_and_leaves_nothing(tmp_path: Path) -> None:
    images = tmp_path / "pictures"
    png = tiny_png()
    with cli_on_terminal("repl", "--images", str(images), with_stdin=True) as terminal:
        terminal.read_until(b"In [1]: ", within=START)
        terminal.send(b"x = 6 * 7\r")
        terminal.read_until(b"In [2]: ")

        # A block: continued until an empty line.
        terminal.send(b"for i in range(2):\r")
        terminal.read_until(b"...: ")
        terminal.send(b"    print('row', i * x)\r")
        terminal.read_until(b"...: ")
        terminal.send(b"\r")
        block = terminal.read_until(b"In [3]: ")

        # An endless cell, interrupted: the session and x survive.
        terminal.send(b"import time\r")
        terminal.read_until(b"In [4]: ")
        terminal.send(b"while True:\r    print('looping', flush=True); time.sleep(0.2)\r\r")
        terminal.read_until(b"\nlooping")  # the cell's output, not the echo of its code
        terminal.send(b"\x03")
        interrupted = terminal.read_until(b"In [5]: ", within=60)
        terminal.send(b"x\r")
        value = terminal.read_until(b"In [6]: ")

        # Hostile output is shown, never obeyed.
        terminal.send(b"print(chr(27) + ']0;pwned' + chr(7) + chr(27) + '[2J')\r")
        hostile = terminal.read_until(b"In [7]: ")

        # An image is saved into the folder and named.
        terminal.send(
            b"from IPython.display import Image, display; "
            b"display(Image(data=bytes.fromhex('" + png.hex().encode() + b"')))\r"
        )
        shown = terminal.read_until(b"In [8]: ")

        terminal.send(b"\x04")
        assert terminal.finish() == 0

    assert b"row 0\r\nrow 42\r\n" in block
    assert b"KeyboardInterrupt" in interrupted
    assert b"Out[5]: 42" in value
    assert b"^[]0;pwned^G^[[2J" in hostile
    assert b"\x1b]0;pwned" not in terminal.received
    assert b"\x1b[2J" not in terminal.received
    (saved,) = images.iterdir()
    assert saved.name.endswith("-cell7-1.png")
    assert saved.read_bytes() == png
    assert f"image saved to {saved}".encode() in shown


def test_a_line_typed_while_a_cell_runs_shows_once() -> None:
    with cli_on_terminal("repl", with_stdin=True) as terminal:
        terminal.read_until(b"In [1]: ", within=START)
        terminal.send(b"import time; print('started', flush=True); time.sleep(5)\r")
        terminal.read_until(b"\nstarted")  # the cell runs: what is typed now waits for it
        terminal.send(b"typed_ahead = 5\r")
        terminal.read_until(b"In [3]: ", within=60)
        terminal.send(b"\x04")
        assert terminal.finish() == 0

    after = bytes(terminal.received).split(b"\nstarted", 1)[1]
    assert after.count(b"typed_ahead = 5") == 1, after


def test_sigterm_closes_the_session(tmp_path: Path) -> None:
    with cli_on_terminal("repl", with_stdin=True) as terminal:
        terminal.read_until(b"In [1]: ", within=START)
        terminal.send(b"import time; time.sleep(600)\r")
        os.kill(terminal.child.pid, signal.SIGTERM)
        assert terminal.finish() == 130  # as every command ends on SIGTERM
    # cli_on_terminal fails when the REPL left its container behind.


def test_piped_cells_run_in_one_session_with_files(tmp_path: Path) -> None:
    data = tmp_path / "numbers.txt"
    data.write_text("3\n4\n")
    cells = (
        "import pathlib\n"
        "numbers = [int(n) for n in pathlib.Path('numbers.txt').read_text().split()]\n"
        "def double(value):\n"
        "    return value * 2\n"
        "\n"
        "print(double(sum(numbers)))\n"
    )
    completed = run_cli("repl", "--file", str(data), stdin=cells, timeout=START)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "14\n"


def test_a_piped_cell_that_times_out_says_so_on_a_line_of_its_own() -> None:
    cells = "import time\ntime.sleep(30)\n\nprint('after')\n"
    completed = run_cli("repl", "--timeout", "1", stdin=cells, timeout=START)

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "after\n"
    lines = completed.stderr.splitlines()
    # The cell's error, then the REPL's note: each a line of its own in a log.
    assert lines[-1] == "[the cell reached its limit of 1s]", lines
    assert lines[-2].startswith("KeyboardInterrupt"), lines


def test_a_bash_repl_keeps_variables_functions_and_the_directory(tmp_path: Path) -> None:
    data = tmp_path / "numbers.txt"
    data.write_text("3\n4\n")
    cells = (
        "total=0\n"
        "double() {\n"
        "  echo $(( $1 * 2 ))\n"
        "}\n"
        "for n in $(cat numbers.txt); do total=$((total + n)); done\n"
        "mkdir -p sub && cd sub\n"
        'double $total; basename "$PWD"\n'
    )
    completed = run_cli(
        "repl", "--language", "bash", "--file", str(data), stdin=cells, timeout=START
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "14\nsub\n"


def test_an_image_never_replaces_a_file_nor_follows_a_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    images, victim = tmp_path / "images", tmp_path / "victim"
    images.mkdir()
    victim.mkdir()
    (images / "s-cell1-1.png").write_bytes(b"mine")
    (images / "s-cell2-1.png").symlink_to(victim / "planted.png")
    image = DisplayOutput(kind="display", data={"image/png": tiny_png()})

    assert _save_images(image, images, "s-cell1-1") == []
    assert _save_images(image, images, "s-cell2-1") == []
    assert _save_images(image, images, "s-cell3-1") == [images / "s-cell3-1.png"]

    assert (images / "s-cell1-1.png").read_bytes() == b"mine"
    assert not list(victim.iterdir())
    assert (images / "s-cell3-1.png").read_bytes() == tiny_png()
    notes = capsys.readouterr().err
    assert "image not saved: cannot save s-cell1-1.png" in notes
    assert "image not saved: cannot save s-cell2-1.png" in notes


def test_a_host_file_past_the_cap_is_refused_without_being_read_whole(tmp_path: Path) -> None:
    # 600 MB (sparse: no disk used, but a whole read would hold it all in memory).
    big = tmp_path / "big.bin"
    with big.open("wb") as handle:
        handle.truncate(600 * 1024 * 1024)
    # A process of its own around the CLI, so that its peak memory is the CLI's alone.
    measured = subprocess.run(
        [
            sys.executable,
            "-c",
            "import resource, subprocess, sys\n"
            "done = subprocess.run(sys.argv[1:], input='print(1)\\n', capture_output=True, "
            "text=True)\n"
            "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "print(done.stderr, file=sys.stderr)",
            sys.executable,
            "-m",
            "sandcrew",
            "repl",
            "--file",
            str(big),
        ],
        capture_output=True,
        text=True,
        timeout=START,
        check=True,
    )
    status, peak_kib = (int(field) for field in measured.stdout.split())

    assert status == 2, measured.stderr
    assert "more than the input limit" in measured.stderr
    assert peak_kib < 300 * 1024, f"the REPL held {peak_kib} KiB"
