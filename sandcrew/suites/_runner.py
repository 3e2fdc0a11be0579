"""Running a suite: one task at a time per slot, results as they come, one report.

:func:`run_suite` is the async core. Where tasks run is an executor's concern:
:class:`LocalExecutor` (this machine's Docker engine) or
:class:`~sandcrew.suites.RayExecutor` (a Ray cluster, each node its own engine).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from sandcrew import __version__
from sandcrew.errors import ConfigurationError

from ._errors import SuiteError
from ._outcomes import TaskOutcome, TaskResult, TaskStatus
from ._reports import SuiteReport
from ._solvers import Solver
from ._tasks import AnswerTask, CodeTask, Suite

if TYPE_CHECKING:
    from sandcrew.sandbox import Sandbox, SandboxConfig

ResultCallback = Callable[[TaskResult], None]


class TaskExecutor(Protocol):
    """Runs tasks somewhere and reports each result as soon as it is known."""

    @property
    def name(self) -> str: ...

    async def execute(
        self,
        tasks: Sequence[AnswerTask | CodeTask],
        solver: Solver,
        *,
        concurrency: int,
        sandbox_config: SandboxConfig,
        on_result: ResultCallback,
    ) -> None:
        """Solve every task, at most ``concurrency`` at once, calling ``on_result`` for each.

        Cancelling it stops the tasks in flight and leaves no container behind.
        """
        ...


class SuiteRecorder:
    """Collects results as they arrive and turns them into a report, finished or not.

    Hand one to :func:`run_suite` to keep the finished results when the run is
    cancelled: ``recorder.report(interrupted=True)``.
    """

    def __init__(self, suite: Suite, *, solver: str, executor: str) -> None:
        self.suite = suite
        self.solver = solver
        self.executor = executor
        self.started_at = datetime.now(UTC)
        self._started = time.monotonic()
        self._results: dict[str, TaskResult] = {}

    def add(self, result: TaskResult) -> None:
        self._results[result.task_id] = result

    @property
    def finished(self) -> int:
        return len(self._results)

    def report(self, *, interrupted: bool = False) -> SuiteReport:
        """The report so far; tasks without a result are listed as ``not_run``."""
        ordered = tuple(
            self._results[task.id] for task in self.suite.tasks if task.id in self._results
        )
        not_run = tuple(task.id for task in self.suite.tasks if task.id not in self._results)
        return SuiteReport(
            suite=self.suite.name,
            source=self.suite.source,
            solver=self.solver,
            executor=self.executor,
            started_at=self.started_at,
            duration=time.monotonic() - self._started,
            interrupted=interrupted,
            not_run=not_run,
            results=ordered,
            sandcrew_version=__version__,
        )


def default_concurrency() -> int:
    """One task per core."""
    return os.cpu_count() or 1


async def run_suite(
    suite: Suite,
    solver: Solver,
    *,
    concurrency: int | None = None,
    executor: TaskExecutor | None = None,
    sandbox_config: SandboxConfig | None = None,
    on_result: ResultCallback | None = None,
    recorder: SuiteRecorder | None = None,
) -> SuiteReport:
    """Solve every task of ``suite`` with ``solver`` and report the verdicts.

    ``concurrency`` defaults to the number of cores; ``executor`` to
    :class:`LocalExecutor`; ``sandbox_config`` to the sandbox's hardened defaults
    (its ``timeout`` applies to tasks that set none). ``on_result`` is called as
    each task finishes. When the run is cancelled, the tasks in flight are
    cancelled too (their containers removed) and ``CancelledError`` propagates;
    ``recorder`` then still holds every finished result.
    """
    from sandcrew.sandbox import SandboxConfig

    slots = default_concurrency() if concurrency is None else concurrency
    if slots < 1:
        raise SuiteError(f"concurrency must be at least 1 (got {slots})")
    chosen = executor if executor is not None else LocalExecutor()
    collected = recorder or SuiteRecorder(suite, solver=solver.name, executor=chosen.name)

    def record(result: TaskResult) -> None:
        collected.add(result)
        if on_result is not None:
            on_result(result)

    await chosen.execute(
        suite.tasks,
        solver,
        concurrency=slots,
        sandbox_config=sandbox_config or SandboxConfig(),
        on_result=record,
    )
    return collected.report()


async def evaluate_task(
    task: AnswerTask | CodeTask, solver: Solver, sandbox: Sandbox
) -> TaskResult:
    """Solve one task and time it; a failure of the harness is that task's ``error``."""
    started = time.monotonic()
    try:
        outcome = await solver.solve(task, sandbox)
    except ConfigurationError:
        raise  # the same for every task: stop the run and say what to configure
    except Exception as error:  # one task's broken harness must not end the whole suite
        outcome = TaskOutcome(status=TaskStatus.ERROR, detail=f"{type(error).__name__}: {error}")
    return TaskResult(
        task_id=task.id,
        kind=task.kind,
        tags=task.tags,
        duration=time.monotonic() - started,
        **outcome.model_dump(),
    )


class LocalExecutor:
    """Runs tasks here, each check in a fresh container of this machine's Docker engine."""

    name = "local"

    async def execute(
        self,
        tasks: Sequence[AnswerTask | CodeTask],
        solver: Solver,
        *,
        concurrency: int,
        sandbox_config: SandboxConfig,
        on_result: ResultCallback,
    ) -> None:
        from sandcrew.sandbox import DockerSandbox

        slots = asyncio.Semaphore(concurrency)

        async def one(task: AnswerTask | CodeTask, sandbox: Sandbox) -> None:
            async with slots:
                result = await evaluate_task(task, solver, sandbox)
            on_result(result)

        async with DockerSandbox(sandbox_config) as sandbox:
            try:
                async with asyncio.TaskGroup() as group:
                    for task in tasks:
                        group.create_task(one(task, sandbox))
            except ExceptionGroup as group_error:
                raise first_leaf(group_error) from None


def first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception inside a (possibly nested) exception group."""
    first = group.exceptions[0]
    return first_leaf(first) if isinstance(first, BaseExceptionGroup) else first
