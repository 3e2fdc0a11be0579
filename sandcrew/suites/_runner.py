"""Running a suite: one task at a time per slot, results as they come, one report.

:func:`run_suite` is the async core. Where tasks run is an executor's concern:
:class:`LocalExecutor` (this machine's Docker engine) or
:class:`~sandcrew.suites.RayExecutor` (a Ray cluster, each node its own engine).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sandcrew import __version__
from sandcrew.suites._executors import (
    ConfirmingCallback,
    Executor,
    Job,
    JobRun,
    LocalExecutor,
    check_concurrency,
    execute_jobs,
)
from sandcrew.suites._outcomes import TaskResult
from sandcrew.suites._reports import SuiteReport
from sandcrew.suites._solvers import Solver
from sandcrew.suites._tasks import Suite

if TYPE_CHECKING:
    from sandcrew.sandbox import SandboxConfig

ResultCallback = Callable[[TaskResult], None]


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


async def run_suite(
    suite: Suite,
    solver: Solver,
    *,
    concurrency: int | None = None,
    executor: Executor | None = None,
    sandbox_config: SandboxConfig | None = None,
    on_result: ResultCallback | None = None,
    recorder: SuiteRecorder | None = None,
    confirm_timeouts: bool = True,
    on_confirming: ConfirmingCallback | None = None,
) -> SuiteReport:
    """Solve every task of ``suite`` with ``solver`` and report the verdicts.

    ``concurrency`` defaults to the executor's choice (locally, one per core);
    ``executor`` to :class:`LocalExecutor`; ``sandbox_config`` to the sandbox's
    hardened defaults (its ``timeout`` applies to tasks that set none). A task
    that timed out runs once more alone before its timeout counts, unless
    ``confirm_timeouts`` is false; ``on_confirming`` hears how many run again before
    they start. ``on_result`` is called as each task finishes. When the run is
    cancelled, the tasks in flight are cancelled too (their containers removed) and
    ``CancelledError`` propagates; ``recorder`` then still holds every finished result.
    """
    from sandcrew.sandbox import SandboxConfig

    check_concurrency(concurrency)
    chosen = executor if executor is not None else LocalExecutor()
    collected = recorder or SuiteRecorder(suite, solver=solver.name, executor=chosen.name)

    def record(index: int, result: TaskResult) -> None:
        collected.add(result)
        if on_result is not None:
            on_result(result)

    jobs = [Job(task, solver) for task in suite.tasks]
    config = sandbox_config or SandboxConfig()
    run = JobRun(jobs, config, record, concurrency=concurrency)
    await execute_jobs(chosen, run, confirm_timeouts=confirm_timeouts, on_confirming=on_confirming)
    return collected.report()
