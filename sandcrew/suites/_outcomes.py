"""What solving one task produced: its status and the numbers around it."""

from __future__ import annotations

import enum

from pydantic import BaseModel, ConfigDict

from sandcrew.crew import CrewResult


class TaskStatus(enum.StrEnum):
    """How a task ended."""

    PASS = "pass"
    """The answer matched, or the harness saw ``check()`` return."""
    FAIL = "fail"
    """The answer or the completion is wrong (a failing check, a wrong answer)."""
    ERROR = "error"
    """No verdict: nothing to check (no completion, no solution) or the harness failed."""
    TIMEOUT = "timeout"
    """The check program ran past its deadline and was killed."""


class TaskOutcome(BaseModel):
    """A solver's verdict on one task, before the runner adds id and timing."""

    model_config = ConfigDict(frozen=True)

    status: TaskStatus
    container_runs: int = 0
    """Containers started for this task (the crew's runs plus the final check)."""
    crew: CrewResult | None = None
    """How the crew's solve went (crew solver only): what ``sandcrew solve --json`` prints."""
    detail: str = ""
    """A short explanation of a non-pass: the tail of stderr, the wrong answer, the error."""
    output: str = ""
    """What the task's check saw: its program's stdout then stderr, or the answer text
    checked when no program ran (its tail, at most 4,000 characters)."""


class TaskResult(BaseModel):
    """One task's line in a report."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    kind: str
    tags: tuple[str, ...] = ()
    status: TaskStatus
    duration: float
    """Wall-clock seconds the solver and the check took together."""
    container_runs: int = 0
    crew: CrewResult | None = None
    """How the crew's solve went (crew solver only)."""
    detail: str = ""
    output: str = ""
    """The check's stdout then stderr, or the answer text checked (see ``TaskOutcome``)."""
    retries: tuple[str, ...] = ()
    """Why the task ran more than once, one line per extra run (a lost worker, a timeout
    run again alone); the result is the last run's."""
    confirmed: bool = False
    """A timeout that happened again when the task ran alone, with nothing else running."""

    @property
    def passed(self) -> bool:
        return self.status is TaskStatus.PASS

    @property
    def verdict(self) -> str:
        """The status as reports show it: ``timeout, confirmed`` for a confirmed timeout."""
        return f"{self.status.value}, confirmed" if self.confirmed else self.status.value

    def crew_cells(self) -> tuple[str, str, str]:
        """Rounds, tokens and stop reason as a report's table shows them (blank without a crew)."""
        if self.crew is None:
            return "", "", ""
        return str(self.crew.rounds), str(self.crew.total_tokens), self.crew.stop_reason.value
