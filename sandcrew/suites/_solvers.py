"""Solvers: where a task's answer or completion comes from.

A solver turns one task into a :class:`TaskOutcome`, running whatever it needs
in the sandbox it is handed (every code check in a fresh container). Solvers
are small picklable values so that the Ray executor can ship them to workers.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from sandcrew.suites._checks import check_answer, run_answer_program, run_code_check
from sandcrew.suites._errors import SuiteError
from sandcrew.suites._outcomes import TaskOutcome, TaskStatus
from sandcrew.suites._tasks import AnswerTask, CodeTask, Suite

if TYPE_CHECKING:
    from sandcrew.crew import CrewSettings
    from sandcrew.sandbox import Sandbox


class SolverName(enum.StrEnum):
    """The solvers the command line offers."""

    CANONICAL = "canonical"
    COMPLETIONS = "completions"
    CREW = "crew"


@runtime_checkable
class Solver(Protocol):
    """Produces and checks an answer for one task."""

    @property
    def name(self) -> str:
        """Shown in reports, e.g. ``canonical``."""
        ...

    async def solve(self, task: AnswerTask | CodeTask, sandbox: Sandbox) -> TaskOutcome:
        """Solve ``task`` and check the result, running code in ``sandbox``."""
        ...


class CanonicalSolver:
    """The task's own solution: validates the harness and the sandbox with no model."""

    name = SolverName.CANONICAL.value

    async def solve(self, task: AnswerTask | CodeTask, sandbox: Sandbox) -> TaskOutcome:
        if isinstance(task, CodeTask):
            if task.canonical_solution is None:
                return _no_solution(task, "canonical_solution")
            return await run_code_check(task, task.canonical_solution, sandbox)
        if task.solution is None:
            return _no_solution(task, "solution")
        return await run_answer_program(task, task.solution, sandbox)


class CompletionsSolver:
    """Completions written elsewhere: task id → code (code tasks) or answer text (answer tasks)."""

    name = SolverName.COMPLETIONS.value

    def __init__(
        self,
        completions: Mapping[str, str],
        *,
        source: str = "completions",
        lines: Mapping[str, int] | None = None,
    ) -> None:
        self.completions = dict(completions)
        self.source = source
        self.lines = dict(lines or {})
        """Task id → the line of the file its completion is on (for error messages)."""

    @classmethod
    def from_file(cls, path: Path) -> CompletionsSolver:
        """Read JSONL lines of ``{"task_id": ..., "completion": ...}``; one line per task."""
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise SuiteError(f"Cannot read completions file {path}: {error}") from None
        completions: dict[str, str] = {}
        seen_on: dict[str, int] = {}
        problems: list[str] = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            problem, task_id, completion = _completion_record(line)
            if problem is not None:
                problems.append(f"line {number}: {problem}")
            elif task_id in seen_on:
                problems.append(
                    f"line {number}: task_id {task_id!r} already has a completion on line "
                    f"{seen_on[task_id]}; keep one completion per task"
                )
            else:
                seen_on[task_id] = number
                completions[task_id] = completion
        if problems:
            listed = "; ".join(problems)
            raise SuiteError(f"Invalid completions file {path}: {listed}")
        return cls(completions, source=str(path), lines=seen_on)

    def check_tasks_known(self, suite: Suite) -> None:
        """Refuse completions for tasks ``suite`` does not have (a typo, another suite's ids)."""
        known = {task.id for task in suite.tasks}
        problems = [
            (f"line {self.lines[task_id]}: " if task_id in self.lines else "")
            + f"task_id {task_id!r} is not a task of suite {suite.name!r}"
            for task_id in self.completions
            if task_id not in known
        ]
        if problems:
            raise SuiteError(f"Invalid completions file {self.source}: {'; '.join(problems)}")

    async def solve(self, task: AnswerTask | CodeTask, sandbox: Sandbox) -> TaskOutcome:
        completion = self.completions.get(task.id)
        if completion is None:
            return TaskOutcome(
                status=TaskStatus.ERROR,
                detail=f"no completion for {task.id!r} in {self.source}",
            )
        if isinstance(task, CodeTask):
            return await run_code_check(task, completion, sandbox)
        return check_answer(task, completion)


class CrewSolver:
    """The full crew: a model writes code, a reviewer checks it, the sandbox runs it.

    Code tasks pass when the last code block the coder wrote passes the task's
    check in a fresh container; answer tasks when the admin's final answer (or
    the output of the last run) holds the expected answer.
    """

    name = SolverName.CREW.value

    def __init__(self, settings: CrewSettings) -> None:
        self.settings = settings

    async def solve(self, task: AnswerTask | CodeTask, sandbox: Sandbox) -> TaskOutcome:
        # Imported here: the crew pulls in the model client, which the other
        # solvers never need.
        from sandcrew.crew import solve_task

        result = await solve_task(crew_prompt(task), self.settings, sandbox=sandbox)
        runs = len(result.runs)
        # The outcome's data only: it travels to the driver (Ray) and into the report, where
        # the chat's messages would weigh and the exception could not be rebuilt.
        kept = result.model_copy(update={"messages": [], "exception": None})
        crew_numbers: dict[str, Any] = {"container_runs": runs, "crew": kept}
        if isinstance(task, AnswerTask):
            last_stdout = result.runs[-1].stdout if result.runs else None
            verdict = check_answer(task, result.answer, last_stdout)
        elif result.last_code is None:
            verdict = TaskOutcome(
                status=TaskStatus.FAIL,
                detail=f"the crew wrote no code (stopped: {result.stop_reason.value})",
            )
        else:
            verdict = await run_code_check(task, result.last_code, sandbox)
            crew_numbers["container_runs"] = runs + verdict.container_runs
        crew_error = result.exception
        if crew_error is not None and verdict.status is not TaskStatus.PASS:
            # The crew broke down (model endpoint, infrastructure): no verdict on the task.
            verdict = TaskOutcome(
                status=TaskStatus.ERROR, detail=f"{type(crew_error).__name__}: {crew_error}"
            )
        return verdict.model_copy(update=crew_numbers)


def crew_prompt(task: AnswerTask | CodeTask) -> str:
    """What the crew is asked: the question itself, or the function to complete."""
    if isinstance(task, AnswerTask):
        return task.prompt
    return (
        f"Complete the Python function `{task.entry_point}` below. Write the whole "
        f"function (signature included) in one Python code block, test it by running it, "
        f"and keep the last code block you write the final version.\n\n"
        f"```python\n{task.prompt.rstrip()}\n```"
    )


def make_solver(
    name: str,
    *,
    completions: Path | None = None,
    crew_settings: Callable[[], CrewSettings] | None = None,
) -> Solver:
    """The solver called ``name``; an unknown name lists the known ones."""
    try:
        which = SolverName(name)
    except ValueError:
        known = ", ".join(solver.value for solver in SolverName)
        raise SuiteError(f"Unknown solver {name!r}; choose one of: {known}") from None
    if which is not SolverName.COMPLETIONS and completions is not None:
        raise SuiteError("--completions only applies to --solver completions")
    if which is SolverName.CANONICAL:
        return CanonicalSolver()
    if which is SolverName.COMPLETIONS:
        if completions is None:
            raise SuiteError("--solver completions needs --completions FILE (JSONL)")
        return CompletionsSolver.from_file(completions)
    if crew_settings is None:
        raise SuiteError("--solver crew needs model settings (--model, --base-url)")
    return CrewSolver(crew_settings())


def _completion_record(line: str) -> tuple[str | None, str, str]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        return f"not valid JSON ({error.msg})", "", ""
    if not isinstance(record, dict):
        return "expected an object with task_id and completion", "", ""
    task_id = record.get("task_id", record.get("id"))
    completion = record.get("completion")
    if not isinstance(task_id, str):
        return "field 'task_id' is missing or not a string", "", ""
    if not isinstance(completion, str):
        return f"field 'completion' is missing or not a string (task_id {task_id!r})", "", ""
    return None, task_id, completion


def _no_solution(task: AnswerTask | CodeTask, field: str) -> TaskOutcome:
    return TaskOutcome(
        status=TaskStatus.ERROR,
        detail=f"task {task.id!r} has no {field}; the canonical solver needs one",
    )
