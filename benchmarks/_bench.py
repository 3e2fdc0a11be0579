"""Shared pieces of the benchmarks: contenders, timing, statistics and result tables.

A *contender* is one way of running ``print(1)`` (sandcrew, a peer, or a floor).
Opening it prepares whatever it keeps between runs (a Docker client, a warm
container, a pool) and yields a :data:`Run`: a blocking or an async callable
that executes the program once and returns its stdout. The latency and
throughput scripts only differ in how they call that run.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

EXPECTED_OUTPUT = "1"
"""What every run of the benchmark program must print."""


class Unavailable(Exception):
    """A contender that is installed but cannot run on this machine (the message says why)."""


@dataclass(frozen=True)
class BlockingRun:
    """One run through a synchronous API; concurrent runs use a thread pool."""

    call: Callable[[], str]


@dataclass(frozen=True)
class AsyncRun:
    """One run through an asyncio API; concurrent runs share the event loop."""

    call: Callable[[], Awaitable[str]]
    pause_before: float = 0.0
    """Untimed seconds before each latency run (the gap between a chat's model turns)."""


Run = BlockingRun | AsyncRun
Opener = Callable[[], AbstractAsyncContextManager[Run]]


@dataclass(frozen=True)
class Contender:
    """A row of the benchmark tables."""

    name: str
    note: str
    open: Opener
    package: str | None = None
    """The pip package that provides it, named when its import fails."""
    slow: bool = False
    latency_only: bool = False
    """Meaningful one run at a time only (e.g. runs spaced out on purpose)."""
    """Seconds per run: latency measures it with fewer runs, throughput skips it."""
    expected_output: str = EXPECTED_OUTPUT
    """What each run must print (stripped); anything else counts as a failed run."""


@dataclass
class Measurement:
    """What one contender did: durations of every run (seconds) and failed runs."""

    name: str
    note: str
    durations: list[float] = field(default_factory=list)
    failures: int = 0
    first_problem: str | None = None
    wall_seconds: float | None = None
    unavailable: str | None = None
    """Why it did not run at all (not installed, not available here)."""
    crash: str | None = None
    """An exception outside the runs themselves (setup or teardown), shown under the table."""
    expected_output: str = EXPECTED_OUTPUT

    @property
    def runs(self) -> int:
        return len(self.durations)

    @property
    def median(self) -> float | None:
        return statistics.median(self.durations) if self.durations else None

    @property
    def p90(self) -> float | None:
        return percentile(self.durations, 90) if self.durations else None

    @property
    def runs_per_second(self) -> float | None:
        if self.wall_seconds is None or self.wall_seconds <= 0:
            return None
        return self.runs / self.wall_seconds

    def record(self, seconds: float, output: str | BaseException) -> None:
        self.durations.append(seconds)
        if isinstance(output, BaseException):
            problem = f"{type(output).__name__}: {output}"
        elif output.strip() != self.expected_output:
            problem = f"printed {output[:200]!r}"
        else:
            return
        self.failures += 1
        if self.first_problem is None:
            self.first_problem = problem


def make_console() -> Console:
    """A console wide enough for the tables when the output goes to a file or pipe."""
    console = Console()
    return console if console.is_terminal else Console(width=180)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile with linear interpolation between closest ranks."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


async def _timed(run: Run, executor: ThreadPoolExecutor | None) -> tuple[float, str | Exception]:
    started = time.perf_counter()
    try:
        if isinstance(run, AsyncRun):
            output: str | Exception = await run.call()
        elif executor is None:
            output = run.call()
        else:
            output = await asyncio.get_running_loop().run_in_executor(executor, run.call)
    except Exception as exc:  # a failed run is data: counted, shown, never hidden
        output = exc
    return time.perf_counter() - started, output


async def _opened(
    contender: Contender, result: Measurement, body: Callable[[Run], Awaitable[None]]
) -> None:
    """Open the contender and run ``body`` with it; record why it could not run, if so."""
    try:
        async with contender.open() as run:
            await body(run)
    except ModuleNotFoundError as exc:
        hint = f" (pip install {contender.package})" if contender.package else ""
        result.unavailable = f"not installed: {exc.name}{hint}"
    except Unavailable as exc:
        result.unavailable = f"not available: {exc}"
    except Exception as exc:  # one contender's crash must not lose the other rows
        result.crash = f"{type(exc).__name__}: {exc}"
        if not result.durations:
            result.unavailable = "crashed (see below)"


async def measure_latency(contender: Contender, *, runs: int, warmup: int) -> Measurement:
    """Run one at a time: ``warmup`` unrecorded runs, then ``runs`` timed ones."""
    result = Measurement(contender.name, contender.note, expected_output=contender.expected_output)

    async def body(run: Run) -> None:
        for _ in range(warmup):
            await _timed(run, None)
        for _ in range(runs):
            if isinstance(run, AsyncRun) and run.pause_before:
                await asyncio.sleep(run.pause_before)
            result.record(*await _timed(run, None))

    await _opened(contender, result, body)
    return result


async def measure_throughput(contender: Contender, *, runs: int, concurrency: int) -> Measurement:
    """Keep ``concurrency`` runs in flight until ``runs`` are done; wall time for all of them."""
    result = Measurement(contender.name, contender.note, expected_output=contender.expected_output)

    async def body(run: Run) -> None:
        with ThreadPoolExecutor(max_workers=concurrency) as executor:
            slots = asyncio.Semaphore(concurrency)

            async def one() -> tuple[float, str | Exception]:
                async with slots:
                    return await _timed(run, executor)

            # Unrecorded warm-up round: fills pools and caches on both sides.
            await asyncio.gather(*(one() for _ in range(concurrency)))
            started = time.perf_counter()
            outcomes = await asyncio.gather(*(one() for _ in range(runs)))
            result.wall_seconds = time.perf_counter() - started
        for seconds, output in outcomes:
            result.record(seconds, output)

    await _opened(contender, result, body)
    return result


def selected(contenders: Sequence[Contender], only: Sequence[str]) -> list[Contender]:
    """The contenders whose name contains one of ``only`` (all when empty)."""
    if not only:
        return list(contenders)
    wanted = [word.lower() for word in only]
    return [c for c in contenders if any(word in c.name.lower() for word in wanted)]


def _ratio(value: float | None, reference: float | None) -> str:
    if value is None or reference is None or reference <= 0:
        return "-"
    return f"{value / reference:.2f}×"


def _outcome(measurement: Measurement) -> str:
    if measurement.runs == 0:
        return "-"
    text = f"{measurement.runs - measurement.failures}/{measurement.runs}"
    return f"[red]{text}[/]" if measurement.failures else text


def print_latency_table(
    console: Console, measurements: Sequence[Measurement], *, reference: str, title: str
) -> None:
    base = next((m.median for m in measurements if m.name == reference), None)
    table = Table(title=title)
    table.add_column("path", style="bold")
    table.add_column("median ms", justify="right")
    table.add_column("p90 ms", justify="right")
    table.add_column(f"÷ {reference}", justify="right")
    table.add_column("ok/runs", justify="right")
    table.add_column("note")
    for m in measurements:
        if m.unavailable is not None:
            table.add_row(m.name, f"[yellow]{m.unavailable}[/]", "", "", "", m.note)
            continue
        median, p90 = m.median, m.p90
        table.add_row(
            m.name,
            f"{median * 1000:,.0f}" if median is not None else "-",
            f"{p90 * 1000:,.0f}" if p90 is not None else "-",
            _ratio(median, base),
            _outcome(m),
            m.note,
        )
    console.print(table)
    print_failures(console, measurements)


def print_throughput_table(
    console: Console, measurements: Sequence[Measurement], *, reference: str, title: str
) -> None:
    base = next((m.runs_per_second for m in measurements if m.name == reference), None)
    table = Table(title=title)
    table.add_column("path", style="bold")
    table.add_column("runs/s", justify="right")
    table.add_column("wall s", justify="right")
    table.add_column("median ms", justify="right")
    table.add_column(f"÷ {reference}", justify="right")
    table.add_column("ok/runs", justify="right")
    table.add_column("note")
    for m in measurements:
        if m.unavailable is not None:
            table.add_row(m.name, f"[yellow]{m.unavailable}[/]", "", "", "", "", m.note)
            continue
        rate, median = m.runs_per_second, m.median
        table.add_row(
            m.name,
            f"{rate:.1f}" if rate is not None else "-",
            f"{m.wall_seconds:.2f}" if m.wall_seconds is not None else "-",
            f"{median * 1000:,.0f}" if median is not None else "-",
            _ratio(rate, base),
            _outcome(m),
            m.note,
        )
    console.print(table)
    print_failures(console, measurements)


def print_failures(console: Console, measurements: Sequence[Measurement]) -> None:
    for m in measurements:
        if m.failures:
            console.print(
                f"[red]{m.name}: {m.failures} of {m.runs} runs failed[/]; first: {m.first_problem}"
            )
        if m.crash:
            console.print(f"[red]{m.name} crashed outside its runs[/]: {m.crash}")


def print_goal(console: Console, text: str, left: float | None, right: float | None) -> None:
    """One line comparing two figures (``left <= right`` is the goal); never an assertion."""
    if left is None or right is None:
        console.print(f"goal {text}: [yellow]not measured[/]")
        return
    verdict = "[green]met[/]" if left <= right else "[red]not met[/]"
    console.print(f"goal {text}: {left:,.1f} vs {right:,.1f} → {verdict}")
