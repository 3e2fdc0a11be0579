"""A test double of the sandbox for crew tests that exercise routing and termination."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sandcrew.sandbox import ExecutionResult


@dataclass(frozen=True)
class Outcome:
    """What a scripted program "did"."""

    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False


FIBONACCI_OUTCOMES: Mapping[str, Outcome] = {
    "print(fibonacci(39))": Outcome(stdout="63245986\n"),
    "print(fib(39))": Outcome(
        exit_code=1,
        stderr='Traceback (most recent call last):\n  File "<main>", line 1, in <module>\n'
        "NameError: name 'fib' is not defined\n",
    ),
    "echo $((6 * 7))": Outcome(stdout="42\n"),
}


class ScriptedSandbox:
    """Answers each run from a table: the first marker the program contains gives the
    outcome, returned as a real :class:`ExecutionResult`. A program the table does not know
    fails the test. ``programs`` records every (language, code) run."""

    def __init__(self, outcomes: Mapping[str, Outcome] = FIBONACCI_OUTCOMES) -> None:
        self.outcomes = dict(outcomes)
        self.programs: list[tuple[str, str]] = []
        self.closed = False

    @property
    def supported_languages(self) -> tuple[str, ...]:
        return ("python", "bash")

    async def start(self) -> None:
        pass

    async def image_packages(self, language: str = "python") -> tuple[str, ...] | None:
        return None  # as an image built without the label

    async def aclose(self) -> None:
        self.closed = True

    def close(self) -> None:
        self.closed = True

    async def run(
        self,
        code: str,
        language: str = "python",
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - mirrors the sandbox's signature
        files: Mapping[str, bytes | Path] | None = None,
    ) -> ExecutionResult:
        self.programs.append((language, code))
        outcome = next((o for marker, o in self.outcomes.items() if marker in code), None)
        if outcome is None:
            raise AssertionError(f"ScriptedSandbox has no outcome for this program:\n{code}")
        return ExecutionResult(
            language=language,
            exit_code=outcome.exit_code,
            stdout=outcome.stdout,
            stderr=outcome.stderr,
            timed_out=outcome.timed_out,
            duration=0.01,
            image="scripted",
            run_id=uuid.uuid4().hex[:12],
            timeout=timeout or 10.0,
            memory_limit_bytes=256 * 1024 * 1024,
        )
