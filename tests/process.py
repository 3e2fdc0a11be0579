"""Run the real `sandcrew` console entry point in a child process."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.sandbox.helpers import our_containers, shared_client


def run_cli(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None, timeout: float = 180
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
    ) as child:
        stdout, stderr = child.communicate(stdin, timeout=timeout)
    if not (env or {}).get("DOCKER_HOST"):
        leftovers = our_containers(shared_client(), owner_pid=child.pid)
        assert not leftovers, f"the CLI left containers behind: {leftovers}"
    return subprocess.CompletedProcess(command, child.returncode, stdout, stderr)
