"""Run the real `sandcrew` console entry point in a child process."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

from tests.sandbox.helpers import our_containers, shared_client


def run_cli(
    *args: str,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 180,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m sandcrew ARGS``; fails when the child left a sandbox container behind."""
    command = [sys.executable, "-m", "sandcrew", *args]
    with subprocess.Popen(
        command,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    ) as child:
        stdout, stderr = child.communicate(stdin, timeout=timeout)
    if not (env or {}).get("DOCKER_HOST"):
        leftovers = our_containers(shared_client(), owner_pid=child.pid)
        assert not leftovers, f"the CLI left containers behind: {leftovers}"
    return subprocess.CompletedProcess(command, child.returncode, stdout, stderr)


def run_cli_in_terminal(
    *args: str, env: dict[str, str] | None = None, timeout: float = 180, columns: int = 160
) -> tuple[int, bytes]:
    """``python -m sandcrew ARGS`` with stdout and stderr on a pseudo-terminal.

    Returns the exit code and every byte the terminal received (the terminal
    turns each newline into CR LF). Fails when the child left a container behind.
    """
    import fcntl
    import select
    import struct
    import termios
    import time

    controller, terminal = os.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    command = [sys.executable, "-m", "sandcrew", *args]
    received = bytearray()
    try:
        with subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=terminal,
            stderr=terminal,
            env={**os.environ, "TERM": "xterm-256color", "COLUMNS": str(columns), **(env or {})},
        ) as child:
            os.close(terminal)
            terminal = -1
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                ready, _, _ = select.select([controller], [], [], 1.0)
                if not ready:
                    continue
                try:
                    data = os.read(controller, 65536)
                except OSError:  # EIO: every writer of the terminal has closed it
                    break
                if not data:
                    break
                received += data
            returncode = child.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        os.close(controller)
        if terminal != -1:
            os.close(terminal)
    leftovers = our_containers(shared_client(), owner_pid=child.pid)
    assert not leftovers, f"the CLI left containers behind: {leftovers}"
    return returncode, bytes(received)


class TerminalSession:
    """A `sandcrew` child on a pseudo-terminal whose screen the test reads as it comes."""

    def __init__(self, child: subprocess.Popen[bytes], controller: int) -> None:
        self.child = child
        self.controller = controller
        self.received = bytearray()
        self._seen = 0

    def read_until(self, wanted: bytes, *, within: float = 120) -> bytes:
        """Read until ``wanted`` appears after what earlier calls matched; what came since."""
        import select
        import time

        deadline = time.monotonic() + within
        while (found := self.received.find(wanted, self._seen)) < 0:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{wanted!r} never came; the screen: {bytes(self.received)!r}"
            ready, _, _ = select.select([self.controller], [], [], min(remaining, 1.0))
            if ready and not self._read_some():
                raise AssertionError(f"the terminal closed before {wanted!r}: {self.received!r}")
        start, self._seen = self._seen, found + len(wanted)
        return bytes(self.received[start : self._seen])

    def send(self, data: bytes) -> None:
        os.write(self.controller, data)

    def finish(self, *, within: float = 120) -> int:
        """Read everything until the child closes the terminal; its exit code."""
        import select
        import time

        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.controller], [], [], 1.0)
            if ready and not self._read_some():
                break
        return self.child.wait(timeout=max(deadline - time.monotonic(), 1))

    def _read_some(self) -> bool:
        try:
            data = os.read(self.controller, 65536)
        except OSError:  # EIO: every writer of the terminal has closed it
            return False
        self.received += data
        return bool(data)


@contextlib.contextmanager
def cli_on_terminal(
    *args: str, env: dict[str, str] | None = None, columns: int = 160, with_stdin: bool = False
) -> Iterator[TerminalSession]:
    """``python -m sandcrew ARGS`` with stdout, stderr (and stdin) on a pseudo-terminal.

    Killed if still running at exit; fails when it left a sandbox container behind.
    """
    import fcntl
    import struct
    import termios

    controller, terminal = os.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    child = subprocess.Popen(
        [sys.executable, "-m", "sandcrew", *args],
        stdin=terminal if with_stdin else subprocess.DEVNULL,
        stdout=terminal,
        stderr=terminal,
        # Its own session, with the terminal as its controlling one: Ctrl-C reaches it.
        preexec_fn=_take_terminal if with_stdin else None,
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": str(columns), **(env or {})},
    )
    os.close(terminal)
    try:
        yield TerminalSession(child, controller)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        os.close(controller)
    leftovers = our_containers(shared_client(), owner_pid=child.pid)
    assert not leftovers, f"the CLI left containers behind: {leftovers}"


def _take_terminal() -> None:
    import fcntl
    import termios

    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
