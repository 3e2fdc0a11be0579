from __future__ import annotations

from typing import Any

from sandcrew.sandbox import ExecutionResult


def make(**changes: Any) -> ExecutionResult:
    fields: dict[str, Any] = {
        "language": "python",
        "exit_code": 0,
        "stdout": "63245986\n",
        "stderr": "",
        "duration": 0.2,
        "image": "sandcrew/python:latest",
        "run_id": "abc",
        "timeout": 10.0,
        "memory_limit_bytes": 256 * 1024 * 1024,
    }
    fields.update(changes)
    return ExecutionResult(**fields)


def test_success() -> None:
    result = make()
    assert result.ok
    assert result.to_runner_message() == "[RUNNER_RESULT]\nexit code 0\n63245986"


def test_failure_labels_stderr() -> None:
    result = make(exit_code=1, stdout="partial\n", stderr="Traceback ...\nZeroDivisionError\n")
    assert not result.ok
    assert result.to_runner_message() == (
        "[RUNNER_RESULT]\nexit code 1\npartial\n[stderr]\nTraceback ...\nZeroDivisionError"
    )


def test_timeout_and_oom_status_lines() -> None:
    timed_out = make(exit_code=124, timed_out=True, stdout="")
    assert not timed_out.ok
    assert timed_out.to_runner_message() == "[RUNNER_RESULT]\ntimed out after 10s\n(no output)"
    oom = make(exit_code=137, oom_killed=True, stdout="")
    assert not oom.ok
    assert oom.status == "killed: out of memory (limit 256 MiB)"


def test_long_output_keeps_head_and_tail() -> None:
    stdout = "".join(f"line {index}\n" for index in range(5000))
    message = make(stdout=stdout).to_runner_message(max_chars=1000)
    assert len(message) <= 1100
    assert "line 0\n" in message
    assert "line 4999" in message
    assert "characters trimmed] …" in message
    trimmed = int(message.split("… [")[1].split(" characters")[0])
    kept = message.split("\n", 2)[2]
    marker = f"\n… [{trimmed} characters trimmed] …\n"
    # Nothing lost but the trimmed characters (and the final newline).
    assert len(kept) - len(marker) + trimmed == len(stdout.rstrip("\n"))


def test_stderr_keeps_room_next_to_long_stdout() -> None:
    message = make(exit_code=1, stdout="x" * 10_000, stderr="ValueError: boom\n").to_runner_message(
        max_chars=2000
    )
    assert message.endswith("[stderr]\nValueError: boom")


def test_truncation_by_the_sandbox_is_mentioned() -> None:
    message = make(stdout="x" * 10, stdout_truncated=True).to_runner_message()
    assert "[stdout truncated by the sandbox]" in message
