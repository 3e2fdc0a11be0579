"""Start `sandcrew e2b` as a real child process, and point the E2B SDK at it as a user would."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.sandbox.helpers import wait_until_gone

REPOSITORY = Path(__file__).resolve().parents[2]
API_KEY = "test-key-" + "0123456789abcdef"


@dataclass
class E2bServer:
    """A running `sandcrew e2b`: its URL, key and process."""

    url: str
    api_key: str
    process: subprocess.Popen[str]

    def environment(self) -> dict[str, str]:
        """The variables a user exports to point the SDK here."""
        return {
            "E2B_API_URL": self.url,
            "E2B_SANDBOX_URL": self.url,
            "E2B_API_KEY": self.api_key,
        }

    def point_sdk_here(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name, value in self.environment().items():
            monkeypatch.setenv(name, value)


@contextlib.contextmanager
def e2b_server(*args: str, api_key: str | None = API_KEY) -> Iterator[E2bServer]:
    """``python -m sandcrew e2b --port 0 ARGS``, until it said where it listens; stopped with
    SIGTERM at the end, and then no container of it may be left."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("E2B_", "OPENAI_", "SANDCREW_"))
    }
    environment["SANDCREW_CONFIG"] = os.devnull  # not the developer's settings
    if api_key is not None:
        environment["SANDCREW_E2B__API_KEY"] = api_key
    # Its log goes to a file: a pipe nobody reads would stop the server once full.
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed with the server below
    process = subprocess.Popen(
        [sys.executable, "-m", "sandcrew", "e2b", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=environment,
        cwd=REPOSITORY,
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_read_lines, args=(process, lines), daemon=True)
    reader.start()
    try:
        exports = _exports(process, lines, within=60)
        server = E2bServer(exports["E2B_API_URL"], exports["E2B_API_KEY"], process)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=30)
        if process.poll() is None:
            process.kill()
            process.wait()
        reader.join(timeout=10)
        process.stdout.close()  # type: ignore[union-attr]
        log.close()
        assert wait_until_gone(process.pid) == [], "the server left containers behind"


def _read_lines(process: subprocess.Popen[str], lines: queue.Queue[str]) -> None:
    """The server's stdout, line by line, then "" at its end (a thread: reads then block)."""
    assert process.stdout is not None
    for line in process.stdout:
        lines.put(line)
    lines.put("")


def _exports(
    process: subprocess.Popen[str], lines: queue.Queue[str], *, within: float
) -> dict[str, str]:
    """The variables of the server's ``export`` lines."""
    found: dict[str, str] = {}
    deadline = time.monotonic() + within
    while "E2B_API_KEY" not in found:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            line = ""
        if not line:
            raise AssertionError(f"sandcrew e2b did not start (exit status {process.poll()})")
        for word in line.removeprefix("export ").split():
            name, _, value = word.partition("=")
            found[name] = value
    return found
