"""`sandcrew suite run|list` (and `evaluate`, in its own module): regression suites of coding tasks.

A thin shell over :mod:`sandcrew.suites`: it reads the options, shows a live
progress bar and a final table, writes the reports and picks the exit code
(see :mod:`sandcrew.cli._exit_codes`: 0 all good, 1 failures or regressions, 2 usage or
configuration errors, 3 Docker or the model endpoint unreachable, 130 interrupted).
"""

from __future__ import annotations

import asyncio
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from sandcrew.cli import _options as options, _output, suite_evaluate
from sandcrew.cli._exit_codes import ExitCode
from sandcrew.cli._terminal import visible_controls
from sandcrew.cli.suite_evaluate import (
    AddressOption,
    ChunkSize,
    ExecutorName,
    ExecutorOption,
    IsolationOption,
    make_executor,
)
from sandcrew.core import ConfigurationError, counted
from sandcrew.suites import Isolation, SolverName

if TYPE_CHECKING:
    from sandcrew.sandbox import SandboxConfig
    from sandcrew.suites import (
        BaselineComparison,
        Confirmations,
        Executor,
        Solver,
        Suite,
        SuiteReport,
        TaskResult,
    )

FAILURE_EXIT = ExitCode.NOT_SOLVED
INTERRUPTED_EXIT = ExitCode.INTERRUPTED
FULL_TABLE_LIMIT = 40
"""Above this many tasks the final table lists only the tasks that did not pass."""

_STATUS_STYLES = {"pass": "green", "fail": "red", "error": "magenta", "timeout": "yellow"}


suite_app = typer.Typer(
    name="suite",
    help="Run regression suites of coding tasks in throwaway containers.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@suite_app.command("run")
def run(
    suite: Annotated[
        str,
        typer.Argument(
            metavar="SUITE", help="A shipped suite (basics, humaneval) or a .yaml/.jsonl file."
        ),
    ],
    solver: Annotated[
        SolverName, typer.Option("--solver", "-s", help="Who writes the solutions.")
    ] = SolverName.CREW,
    completions: Annotated[
        Path | None,
        typer.Option(help="JSONL of {task_id, completion} for --solver completions."),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            "-j",
            help="Tasks at once (default: one per core; on Ray, chunks at once, one per CPU).",
        ),
    ] = None,
    filters: Annotated[
        list[str] | None,
        typer.Option(
            "--filter",
            "-k",
            help="Keep tasks whose id or tag contains this (or matches a glob); repeatable.",
            metavar="PATTERN",
        ),
    ] = None,
    run_timeout: options.RunTimeoutOrTimeout = None,
    allow_host: options.AllowHost = None,
    secret_header: options.SecretHeader = None,
    report: Annotated[Path | None, typer.Option(help="Write a JSON report here.")] = None,
    junit: Annotated[Path | None, typer.Option(help="Write a JUnit XML report here.")] = None,
    html: Annotated[
        Path | None, typer.Option(help="Write a self-contained HTML report here.")
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(help="A previous --report: list regressions and fixes, fail on regressions."),
    ] = None,
    allow_failures: Annotated[
        bool, typer.Option(help="Without --baseline, exit 0 even when tasks do not pass.")
    ] = False,
    executor: ExecutorOption = ExecutorName.LOCAL,
    address: AddressOption = None,
    isolation: IsolationOption = Isolation.TASK,
    chunk_size: ChunkSize = None,
    model: options.Model = None,
    base_url: options.BaseUrl = None,
    token_budget: options.TokenBudget = None,
    time_budget: options.TimeBudget = None,
    request_timeout: options.RequestTimeout = None,
    config: options.Config = None,
) -> None:
    """Solve every task of SUITE and check the results in throwaway containers.

    With the crew solver, --token-budget and --time-budget apply to each task's chat."""
    from sandcrew.cli._preflight import check_before_solving, check_sandbox_image
    from sandcrew.suites import (
        CompletionsSolver,
        SuiteError,
        load_suite,
        make_solver,
        read_json_report,
    )

    crew_flags = {
        "--token-budget": token_budget,
        "--time-budget": time_budget,
        "--request-timeout": request_timeout,
    }
    given = [flag for flag, value in crew_flags.items() if value is not None]
    if given and solver is not SolverName.CREW:
        verb = "applies" if len(given) == 1 else "apply"
        raise SuiteError(f"{', '.join(given)} only {verb} to --solver crew")
    settings = options.settings_from_options(
        config=config,
        model=model,
        base_url=base_url,
        token_budget=token_budget,
        time_budget=time_budget,
        request_timeout=request_timeout,
        suites={"concurrency": concurrency},
        sandbox=options.sandbox_flags(
            run_timeout=run_timeout, allow_hosts=allow_host, secret_headers=secret_header
        ),
    )
    if settings.sandbox.egress is not None and isolation is not Isolation.TASK:
        raise SuiteError(
            "--allow-host and --secret-header need --isolation task: a batch container "
            "runs many tasks, which one network policy could not tell apart"
        )
    if solver is SolverName.CREW and not settings.endpoint.configured:
        # The default solver needs a model; the harness and the sandbox can be tried without.
        raise ConfigurationError(
            f"--solver crew (the default) needs a model: {settings.endpoint.not_configured()}; "
            f"or check the suite without one: `sandcrew suite run {shlex.quote(suite)} "
            "--solver canonical` runs each task's own solution"
        )
    chosen_solver = make_solver(solver, completions=completions, crew_settings=lambda: settings)
    loaded = load_suite(suite)
    if isinstance(chosen_solver, CompletionsSolver):
        chosen_solver.check_tasks_known(loaded)
    selected = loaded.filtered(filters or ())
    if not selected.tasks:
        raise SuiteError(
            f"No task of suite {loaded.name!r} matches --filter {' '.join(filters or ())}"
        )
    for option, path in (("--report", report), ("--junit", junit), ("--html", html)):
        if path is not None and not path.parent.is_dir():
            raise SuiteError(f"{option} {path}: the folder {path.parent} does not exist")
    previous = read_json_report(baseline) if baseline is not None else None
    if previous is not None and (previous.suite, previous.solver) != (selected.name, solver):
        raise SuiteError(
            f"--baseline {baseline} is a report of suite {previous.suite!r} with solver "
            f"{previous.solver!r}; this run is suite {selected.name!r} with solver "
            f"{solver.value!r}, so its verdicts cannot be compared"
        )
    # Before Docker and the model: a cluster that does not answer fails within seconds.
    task_executor = make_executor(executor, address, isolation, chunk_size)
    # On a cluster, each node's engine is checked where the chunk lands (an error names it).
    sandbox_here = executor is ExecutorName.LOCAL
    if solver is SolverName.CREW:
        check_before_solving(settings, sandbox_here=sandbox_here)
    elif sandbox_here:
        check_sandbox_image(settings.sandbox, "python")
    run_model = settings.endpoint.model if solver is SolverName.CREW else None
    if previous is not None:
        _warn_on_baseline_differences(previous, baseline, run_model)
    sandbox_config = settings.sandbox

    console = _output.console()
    final, interrupted = _run_with_progress(
        selected, chosen_solver, task_executor, settings.suites.concurrency, sandbox_config
    )
    if run_model is not None:
        final = final.model_copy(update={"model": run_model})
    comparison = None
    if previous is not None:
        from sandcrew.suites import compare_with_baseline

        comparison = compare_with_baseline(final, previous)
    if report is not None:
        from sandcrew.suites import write_json_report

        write_json_report(final, report)
    if junit is not None:
        from sandcrew.suites import write_junit

        write_junit(final, junit)
    if html is not None:
        from sandcrew.suites import write_html_report

        write_html_report(final, html, comparison)
    _print_results(console, final, report_file=report)
    if comparison is not None:
        _print_comparison(console, comparison, baseline)
    raise typer.Exit(_exit_code(final, comparison, interrupted, allow_failures))


@suite_app.command("report")
def report_command(
    report: Annotated[
        Path,
        typer.Argument(metavar="REPORT", help="A JSON report written by `suite run --report`."),
    ],
    html: Annotated[Path, typer.Option(help="Write the self-contained HTML page here.")],
    baseline: Annotated[
        Path | None,
        typer.Option(help="A previous --report: show regressions and fixes first."),
    ] = None,
) -> None:
    """Render an existing JSON report as a self-contained HTML page."""
    from sandcrew.suites import (
        SuiteError,
        compare_with_baseline,
        read_json_report,
        write_html_report,
    )

    final = read_json_report(report)
    comparison = None
    if baseline is not None:
        comparison = compare_with_baseline(final, read_json_report(baseline))
    if not html.parent.is_dir():
        raise SuiteError(f"--html {html}: the folder {html.parent} does not exist")
    write_html_report(final, html, comparison)
    _output.console(stderr=True).print(f"wrote {escape(str(html))}")


@suite_app.command("list")
def list_suites(as_json: options.Json = False) -> None:
    """Show the suites shipped with sandcrew."""
    from sandcrew.suites import list_suites as shipped

    if as_json:
        _output.print_json({"suites": _output.as_dicts(shipped())})
        return
    table = Table(title="Shipped suites")
    table.add_column("Suite", style="bold")
    table.add_column("Tasks", justify="right")
    table.add_column("About")
    for info in shipped():
        count = str(info.task_count) if info.task_count is not None else "-"
        about = info.description if info.problem is None else f"{info.description} — {info.problem}"
        table.add_row(info.name, count, escape(about))
    _output.console().print(table)


suite_app.command("evaluate")(suite_evaluate.evaluate)


def _warn_on_baseline_differences(
    previous: SuiteReport, baseline: Path | None, model: str | None
) -> None:
    """One stderr line when the baseline ran another model or sandcrew: verdicts may differ."""
    import sandcrew
    from sandcrew.suites import baseline_differences

    differences = baseline_differences(previous, model=model, sandcrew_version=sandcrew.__version__)
    if differences:
        _output.console(stderr=True).print(
            f"warning: --baseline {baseline} was run with {' and '.join(differences)}; "
            "a change in verdicts may come from that",
            markup=False,
            highlight=False,
        )


def _run_with_progress(
    suite: Suite,
    solver: Solver,
    executor: Executor,
    concurrency: int | None,
    sandbox_config: SandboxConfig,
) -> tuple[SuiteReport, bool]:
    """Run the suite under a live progress bar; Ctrl-C keeps the finished results."""
    from sandcrew.suites import SuiteRecorder, run_suite

    recorder = SuiteRecorder(suite, solver=solver.name, executor=executor.name)
    err = _output.console(stderr=True)
    progress = Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("[green]{task.fields[passed]} passed[/] [red]{task.fields[failed]} not passed"),
        TimeElapsedColumn(),
        TextColumn("ETA {task.fields[eta]}"),
        console=err,
        disable=not _output.is_terminal(sys.stderr),
    )
    pace = _Pace(len(suite.tasks))
    bar = progress.add_task(suite.name, total=len(suite.tasks), passed=0, failed=0, eta="-")

    def advance(result: TaskResult) -> None:
        pace.finished(result)
        eta = _clock(pace.remaining())
        progress.update(bar, advance=1, passed=pace.passed, failed=pace.failed, eta=eta)
        if progress.disable:
            err.print(_progress_line(result, pace), markup=False)

    def confirming(confirmations: Confirmations) -> None:
        pace.confirming = confirmations
        what = (
            f"confirming {counted(confirmations.count, 'timeout')} alone, one at a time "
            f"(at most {_clock(confirmations.seconds)})"
        )
        progress.update(bar, description=what, eta=_clock(pace.remaining()))
        if progress.disable:
            err.print(f"[{pace.done}/{pace.total}] {what}", markup=False, highlight=False)

    async def main() -> SuiteReport:
        return await run_suite(
            suite,
            solver,
            concurrency=concurrency,
            executor=executor,
            sandbox_config=sandbox_config,
            on_result=advance,
            recorder=recorder,
            # A crew's second try is another solve, not the same program timed again.
            confirm_timeouts=solver.name != SolverName.CREW.value,
            on_confirming=confirming,
        )

    with progress:
        try:
            return asyncio.run(main()), False
        except KeyboardInterrupt:
            pass
    _output.console(stderr=True).print("[yellow]Interrupted: reporting the tasks that finished.[/]")
    return recorder.report(interrupted=True), True


class _Pace:
    """Where a run is and when it will be done; timeouts confirmed last count at their limits."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.passed = 0
        self.failed = 0
        self.confirming: Confirmations | None = None
        self._confirmed = 0
        self._started = time.monotonic()

    @property
    def done(self) -> int:
        return self.passed + self.failed

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def finished(self, result: TaskResult) -> None:
        if result.passed:
            self.passed += 1
        else:
            self.failed += 1
        if self.confirming is not None:
            self._confirmed += 1

    def remaining(self) -> float:
        """Seconds still to go: the confirmations' limits once they run, else the pace so far."""
        if self.confirming is not None:
            left = self.confirming.count - self._confirmed
            return self.confirming.seconds * left / self.confirming.count
        return self.elapsed / self.done * (self.total - self.done) if self.done else 0.0


def _progress_line(result: TaskResult, pace: _Pace) -> str:
    """One plain line per finished task, for logs: where we are and when we will be done."""
    return (
        f"[{pace.done}/{pace.total}] {result.task_id} {result.status.value} · "
        f"{pace.passed} passed, {pace.failed} not passed · "
        f"elapsed {_clock(pace.elapsed)} · ETA {_clock(pace.remaining())}"
    )


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def _print_results(console: Console, report: SuiteReport, *, report_file: Path | None) -> None:
    shown = list(report.results)
    hidden = 0
    if len(shown) > FULL_TABLE_LIMIT:
        shown = [result for result in report.results if not result.passed]
        hidden = len(report.results) - len(shown)
    crew_columns = any(result.crew is not None for result in report.results)
    if shown:
        table = Table(title=f"{report.suite} · solver {report.solver}")
        table.add_column("Task", no_wrap=True)
        table.add_column("Status")
        table.add_column("Time", justify="right")
        table.add_column("Runs", justify="right")
        if crew_columns:
            table.add_column("Rounds", justify="right")
            table.add_column("Tokens", justify="right")
            table.add_column("Stop reason")
        # In a log the table is as wide as the piped console, so details keep to one line.
        table.add_column("Detail", overflow="fold", max_width=60 if console.is_terminal else None)
        for result in shown:
            style = _STATUS_STYLES[result.status.value]
            row = [
                _cell(result.task_id),
                f"[{style}]{result.verdict}[/]",
                f"{result.duration:.2f}s",
                str(result.container_runs),
            ]
            if crew_columns:
                row += [_cell(cell) for cell in result.crew_cells()]
            row.append(_cell(_last_lines(result.detail)))
            table.add_row(*row)
        console.print(table)
    if hidden:
        every_task = (
            f"{escape(str(report_file))} has every task"
            if report_file is not None
            else "--report FILE writes every task"
        )
        console.print(
            f"{counted(hidden, 'passing task')} not listed ({every_task}).", soft_wrap=True
        )
    counts = report.counts
    summary = (
        f"{counted(counts.total, 'task')}: [green]{counts.passed} passed[/], "
        f"[red]{counts.failed} failed[/], [magenta]{counted(counts.errors, 'error')}[/], "
        f"[yellow]{counted(counts.timeouts, 'timeout')}[/]"
    )
    if counts.not_run:
        summary += f", {counts.not_run} not run"
    console.print(f"{summary} in {report.duration:.1f}s")
    rerun = sum(1 for result in report.results if result.retries)
    if rerun:
        console.print(
            f"{counted(rerun, 'task')} ran more than once (a timeout run again alone, or a lost "
            "worker); the --report file says why for each."
        )


def _print_comparison(
    console: Console, comparison: BaselineComparison, baseline: Path | None
) -> None:
    if comparison.regressions:
        regressions = counted(len(comparison.regressions), "regression")
        console.print(f"[bold red]{regressions}[/] since {baseline}:")
        for change in comparison.regressions:
            detail = _last_lines(change.detail, lines=1)
            console.print(
                f"  [red]{_cell(change.task_id)}[/]: {change.before} → {change.after}"
                + (f" ({_cell(detail)})" if detail else "")
            )
    else:
        console.print(f"[green]No regressions[/] since {baseline}.")
    if comparison.fixes:
        console.print(f"[bold green]{counted(len(comparison.fixes), 'fix', 'fixes')}[/]:")
        for change in comparison.fixes:
            console.print(f"  [green]{_cell(change.task_id)}[/]: {change.before} → {change.after}")
    if comparison.still_failing:
        still = len(comparison.still_failing)
        console.print(f"{counted(still, 'task')} still {'does' if still == 1 else 'do'} not pass.")
    if comparison.new_tasks:
        new = len(comparison.new_tasks)
        console.print(
            f"{counted(new, 'task')} {'is' if new == 1 else 'are'} new (not in the baseline)."
        )


def _exit_code(
    report: SuiteReport,
    comparison: BaselineComparison | None,
    interrupted: bool,
    allow_failures: bool,
) -> int:
    if interrupted:
        return INTERRUPTED_EXIT
    if comparison is not None:
        return FAILURE_EXIT if comparison.has_regressions else 0
    if report.all_passed or allow_failures:
        return 0
    return FAILURE_EXIT


def _cell(text: str) -> str:
    """Task text for the terminal: markup escaped, control characters made visible."""
    return escape(visible_controls(text))


def _last_lines(text: str, *, lines: int = 3) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(kept[-lines:])
