"""`sandcrew run` reads at most the code cap of its source, whatever the source holds."""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from sandcrew.sandbox import SandboxConfig

USAGE_ERROR_EXIT = 125
"""`sandcrew run` refuses bad input as `docker run` does: 125, sandcrew itself failed."""
PEAK_RSS_BOUND = 200 * 1024 * 1024
"""The interpreter with sandcrew's imports stays well below this; the old reader took gigabytes."""
ADDRESS_SPACE_CAP = 2 * 1024 * 1024 * 1024
"""A regression then fails with MemoryError instead of taking the machine down."""
CODE_CAP = SandboxConfig().max_code_bytes
STDIN_BYTES = 500 * 1024 * 1024


@dataclass
class Finished:
    returncode: int
    stderr: str
    peak_rss_bytes: int


def _cap_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_CAP, ADDRESS_SPACE_CAP))


def run_measured(*args: str, feed_stdin: int = 0) -> Finished:
    """Run ``python -m sandcrew ARGS``; feed ``feed_stdin`` zero bytes; measure its peak RSS."""
    child = subprocess.Popen(
        [sys.executable, "-m", "sandcrew", *args],
        stdin=subprocess.PIPE if feed_stdin else subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=_cap_address_space,
    )
    writer = None
    if feed_stdin:
        assert child.stdin is not None
        writer = threading.Thread(target=_feed_zeros, args=(child.stdin, feed_stdin), daemon=True)
        writer.start()
    assert child.stderr is not None
    with child.stderr:
        stderr = child.stderr.read().decode()
    # wait4 gives this child's own resource usage (ru_maxrss in KiB on Linux).
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if writer is not None:
        writer.join(timeout=60)
        assert not writer.is_alive()
    return Finished(child.returncode, stderr, usage.ru_maxrss * 1024)


def _feed_zeros(stdin: IO[bytes], total: int) -> None:
    chunk = bytes(1024 * 1024)
    sent = 0
    try:
        while sent < total:
            stdin.write(chunk)
            sent += len(chunk)
    except BrokenPipeError:
        pass  # the reader stopped after the cap, as it should
    finally:
        with contextlib.suppress(BrokenPipeError):
            stdin.close()


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_run_refuses_a_fifo_or_a_device_at_once(tmp_path: Path, kind: str) -> None:
    source = "/dev/zero"
    if kind == "fifo":
        source = str(tmp_path / "program.py")
        os.mkfifo(source)  # no writer ever opens it: reading would block forever

    finished = run_measured("run", source)

    assert finished.returncode == USAGE_ERROR_EXIT, finished.stderr
    assert finished.stderr == (
        f"error: cannot read {source}: not a regular file (give a file, or - for stdin)\n"
    )
    assert finished.peak_rss_bytes < PEAK_RSS_BOUND


def test_run_500_mb_on_stdin_is_refused_after_reading_the_cap() -> None:
    finished = run_measured("run", "-", feed_stdin=STDIN_BYTES)

    assert finished.returncode == USAGE_ERROR_EXIT, finished.stderr
    assert f"stdin is larger than the sandbox accepts (at most {CODE_CAP} bytes)" in finished.stderr
    assert finished.peak_rss_bytes < PEAK_RSS_BOUND


@pytest.mark.parametrize("extra", [0, 1], ids=["at-the-cap", "one-byte-over"])
def test_the_cap_is_exact(tmp_path: Path, extra: int) -> None:
    from sandcrew.cli.run import read_program
    from sandcrew.errors import UserError

    path = tmp_path / "big.py"
    path.write_bytes(b"#" * (CODE_CAP + extra))
    if extra:
        with pytest.raises(UserError, match="is larger than"):
            read_program(str(path), limit=CODE_CAP)
    else:
        assert len(read_program(str(path), limit=CODE_CAP)) == CODE_CAP


def test_a_directory_is_a_clear_error(tmp_path: Path) -> None:
    finished = run_measured("run", str(tmp_path))

    assert finished.returncode == USAGE_ERROR_EXIT
    assert finished.stderr.startswith("error: cannot read")
    assert "Traceback" not in finished.stderr
