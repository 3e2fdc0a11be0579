"""Where jobs run: many (task, solver) jobs in, one result each out, as soon as it is known.

A suite run makes one job per task; a pass@k evaluation one job per sample (the
sample's completion is the solver). Every executor takes a *sandbox factory*;
the isolation level is only which factory: :attr:`Isolation.TASK` gives each
run a new container (:class:`~sandcrew.sandbox.DockerSandbox`),
:attr:`Isolation.BATCH` runs many in one container, each as its own uid in its
own directory (:class:`~sandcrew.sandbox.BatchSandbox`). :class:`LocalExecutor`
runs the jobs on this machine's engine, :class:`~sandcrew.suites.RayExecutor`
in chunks over a Ray cluster, each node on its own engine.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from sandcrew.errors import ConfigurationError, ErrorCode, InfrastructureError
from sandcrew.suites._errors import SuiteError
from sandcrew.suites._outcomes import TaskOutcome, TaskResult, TaskStatus
from sandcrew.suites._solvers import Solver
from sandcrew.suites._tasks import AnswerTask, CodeTask

if TYPE_CHECKING:
    from sandcrew.sandbox import Sandbox, SandboxConfig

SAME_FOR_EVERY_JOB = frozenset({ErrorCode.DOCKER_UNAVAILABLE, ErrorCode.IMAGE_NOT_FOUND})
"""Infrastructure failures that no other job would escape: they end the run."""


class SandboxFactory(Protocol):
    """Makes the sandbox an executor runs its jobs in, for ``slots`` runs at once."""

    def __call__(self, config: SandboxConfig, *, slots: int) -> Sandbox: ...


def container_per_run(config: SandboxConfig, *, slots: int) -> Sandbox:
    """A new throwaway, hardened container for every run (``slots`` does not matter)."""
    from sandcrew.sandbox import DockerSandbox

    return DockerSandbox(config)


def batch_container(config: SandboxConfig, *, slots: int) -> Sandbox:
    """One throwaway, hardened container for many runs, each as its own uid in its own dir."""
    from sandcrew.sandbox import BatchSandbox

    return BatchSandbox(config, slots=slots)


class Isolation(enum.StrEnum):
    """How runs are kept apart, i.e. which sandbox factory an executor uses."""

    TASK = "task"
    """A new container per run."""
    BATCH = "batch"
    """Many runs in one container, each as its own uid in its own directory (``BatchSandbox``)."""

    @property
    def factory(self) -> SandboxFactory:
        return batch_container if self is Isolation.BATCH else container_per_run

    def executor_name(self, place: str) -> str:
        """How reports name an executor at ``place`` with this isolation."""
        return place if self is Isolation.TASK else f"{place}, batch container"


@dataclass(frozen=True)
class Job:
    """One task to solve with one solver (a suite's task, or one sample of an evaluation)."""

    task: AnswerTask | CodeTask
    solver: Solver


JobCallback = Callable[[int, TaskResult], None]
"""Called with the index of a job in the sequence handed over and its result."""


@dataclass(frozen=True)
class JobRun:
    """Jobs handed to an executor, and how to run them."""

    jobs: Sequence[Job]
    sandbox_config: SandboxConfig
    on_result: JobCallback
    """Called once for each job, as soon as its result is known."""
    concurrency: int | None = None
    """At most this many at once (``None``: the executor's own choice; ``1``: strictly one
    after the other, nothing queued)."""


class Executor(Protocol):
    """Runs jobs somewhere and reports each result as soon as it is known."""

    @property
    def name(self) -> str:
        """Shown in reports, e.g. ``local, batch container``."""
        ...

    async def execute(self, run: JobRun) -> None:
        """Run every job of ``run``, calling its ``on_result`` once for each.

        A job whose harness breaks gets an ``error`` result; a failure that would be
        the same for every job (bad settings, no Docker, no image) propagates.
        Cancelling stops the jobs in flight and leaves no container behind.
        """
        ...


def default_concurrency() -> int:
    """One job per core."""
    return os.cpu_count() or 1


def check_concurrency(concurrency: int | None) -> int | None:
    if concurrency is not None and concurrency < 1:
        raise SuiteError(f"concurrency must be at least 1 (got {concurrency})")
    return concurrency


class LocalExecutor:
    """Runs jobs here, on this machine's Docker engine, in one sandbox from the factory.

    ``isolation`` picks the factory (``sandbox_factory`` replaces it, e.g. with
    a test double); the sandbox is made for ``concurrency`` runs at once.
    """

    def __init__(
        self,
        isolation: Isolation | str = Isolation.TASK,
        *,
        sandbox_factory: SandboxFactory | None = None,
    ) -> None:
        self.isolation = Isolation(isolation)
        self.sandbox_factory = sandbox_factory or self.isolation.factory

    @property
    def name(self) -> str:
        return self.isolation.executor_name("local")

    async def execute(self, run: JobRun) -> None:
        concurrency = check_concurrency(run.concurrency)
        slots = min(concurrency or default_concurrency(), max(1, len(run.jobs)))
        sandbox = self.sandbox_factory(run.sandbox_config, slots=slots)
        try:
            await sandbox.start()
            workers = 1 if concurrency == 1 else runs_at_once(sandbox, slots)
            await run_jobs(sandbox, list(enumerate(run.jobs)), workers, run.on_result)
        finally:
            await sandbox.aclose()


def runs_at_once(sandbox: Sandbox, slots: int) -> int:
    """Runs to keep in flight: ``slots``, or what a queueing sandbox accepts (a batch's)."""
    accepted = getattr(sandbox, "programs_at_once", None)
    return accepted if isinstance(accepted, int) and accepted > slots else slots


async def run_jobs(
    sandbox: Sandbox,
    jobs: Sequence[tuple[int, Job]],
    workers: int,
    on_result: JobCallback,
) -> None:
    """Run indexed jobs in ``sandbox`` with ``workers`` at once, reporting each result."""
    pending = iter(jobs)
    try:
        async with asyncio.TaskGroup() as group:
            # A fixed set of workers pulling from one iterator keeps the number
            # of asyncio tasks flat however many jobs there are.
            for _ in range(min(workers, len(jobs))):
                group.create_task(_worker(pending, sandbox, on_result))
    except ExceptionGroup as group_error:
        raise first_leaf(group_error) from None


async def _worker(
    pending: Iterator[tuple[int, Job]], sandbox: Sandbox, on_result: JobCallback
) -> None:
    for index, job in pending:
        on_result(index, await evaluate_task(job.task, job.solver, sandbox))


async def evaluate_task(
    task: AnswerTask | CodeTask, solver: Solver, sandbox: Sandbox
) -> TaskResult:
    """Solve one task and time it; a failure of the harness is that task's ``error``."""
    started = time.monotonic()
    try:
        outcome = await solver.solve(task, sandbox)
    except ConfigurationError:
        raise  # the same for every task: stop the run and say what to configure
    except InfrastructureError as error:
        if error.code in SAME_FOR_EVERY_JOB:
            raise
        outcome = _harness_error(error)
    except Exception as error:  # one task's broken harness must not end the whole run
        outcome = _harness_error(error)
    return TaskResult(
        task_id=task.id,
        kind=task.kind,
        tags=task.tags,
        duration=time.monotonic() - started,
        **outcome.model_dump(),
    )


@dataclass(frozen=True)
class Confirmations:
    """Timeouts about to run again, alone and one at a time, before they count."""

    count: int
    seconds: float
    """The longest the confirmations may take together: the sum of their time limits."""


ConfirmingCallback = Callable[[Confirmations], None]


async def execute_jobs(
    executor: Executor,
    run: JobRun,
    *,
    confirm_timeouts: bool,
    on_confirming: ConfirmingCallback | None = None,
) -> None:
    """Run ``run`` on ``executor``; with ``confirm_timeouts``, a job that timed out runs once
    more alone before it counts.

    A loaded machine turns slow-but-correct programs into timeouts. Each timed-out
    job runs again with nothing else running (on a cluster: one chunk of one job
    at a time); its second result is reported, as ``confirmed`` when it timed out
    again, and says that it was re-run. ``on_confirming`` hears how many run again
    (and how long they may take) before they start.
    """
    if not confirm_timeouts:
        await executor.execute(run)
        return
    timed_out: list[int] = []
    first: dict[int, TaskResult] = {}

    def hold_timeouts(index: int, result: TaskResult) -> None:
        if result.status is TaskStatus.TIMEOUT:
            timed_out.append(index)
            first[index] = result
        else:
            run.on_result(index, result)

    await executor.execute(dataclasses.replace(run, on_result=hold_timeouts))
    if not timed_out:
        return
    timed_out.sort()
    if on_confirming is not None:
        limits = (run.jobs[index].task.timeout or run.sandbox_config.timeout for index in timed_out)
        on_confirming(Confirmations(count=len(timed_out), seconds=sum(limits)))

    def confirm(position: int, result: TaskResult) -> None:
        index = timed_out[position]
        note = f"{first[index].detail} with others running; run again alone"
        run.on_result(
            index,
            result.model_copy(
                update={
                    "retries": (*first[index].retries, *result.retries, note),
                    "confirmed": result.status is TaskStatus.TIMEOUT,
                    # Both runs' containers: the result is the second run's, the work both.
                    "container_runs": first[index].container_runs + result.container_runs,
                }
            ),
        )

    again = [run.jobs[index] for index in timed_out]
    await executor.execute(dataclasses.replace(run, jobs=again, concurrency=1, on_result=confirm))


def _harness_error(error: Exception) -> TaskOutcome:
    return TaskOutcome(status=TaskStatus.ERROR, detail=f"{type(error).__name__}: {error}")


def first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception inside a (possibly nested) exception group."""
    first = group.exceptions[0]
    return first_leaf(first) if isinstance(first, BaseExceptionGroup) else first
