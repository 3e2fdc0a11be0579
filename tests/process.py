"""Run the real `sandcrew` console entry point in a child process."""

from __future__ import annotations

import os
import subprocess
import sys

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
