"""How a sandboxed run reads to frameworks that expect a process's exit code and output."""

from __future__ import annotations

from sandcrew.sandbox import ExecutionResult

TIMEOUT_EXIT_CODE = 124
"""A program killed at its deadline, as coreutils' ``timeout`` reports it."""
KILLED_EXIT_CODE = 137
"""A program killed for its memory (128 + SIGKILL)."""


def posix_exit_code(result: ExecutionResult) -> int:
    """The program's own exit code, or 124 when it timed out and 137 when killed for memory."""
    if result.timed_out:
        return TIMEOUT_EXIT_CODE
    if result.oom_killed:
        return KILLED_EXIT_CODE
    return result.exit_code


def combined_output(result: ExecutionResult) -> str:
    """stdout then stderr, with a note for what the sandbox cut or killed."""
    parts = [result.stdout, result.stderr]
    if result.stdout_truncated or result.stderr_truncated:
        parts.append("\n[output truncated by the sandbox]")
    if result.oom_killed:
        parts.append(f"\n[{result.status}]")
    return "".join(parts)
