"""Regression suites of coding tasks: load, solve in containers, report, compare.

The core is pure and async: :func:`load_suite` reads tasks, :func:`run_suite`
solves them with a :class:`Solver` on an executor (this machine or a Ray
cluster), and the resulting :class:`SuiteReport` is written as JSON or JUnit
XML and compared with a previous one by :func:`compare_with_baseline`. The
``sandcrew suite`` command is a thin shell around these.
"""

from sandcrew.suites._baseline import (
    BaselineComparison,
    StatusChange,
    baseline_differences,
    compare_with_baseline,
)
from sandcrew.suites._checks import answer_matches, check_program, numbers_in
from sandcrew.suites._errors import SuiteError
from sandcrew.suites._evaluation import (
    Evaluation,
    RelativeTimeLimit,
    SampleResult,
    evaluate_functional_correctness,
    evaluate_samples,
)
from sandcrew.suites._executors import (
    Confirmations,
    Executor,
    Isolation,
    Job,
    JobRun,
    LocalExecutor,
    SandboxFactory,
    batch_container,
    container_per_run,
    default_concurrency,
    evaluate_task,
)
from sandcrew.suites._harness import SealedCheck, seal_check
from sandcrew.suites._html import render_html_report, write_html_report
from sandcrew.suites._loading import (
    HUMANEVAL,
    SuiteInfo,
    list_suites,
    load_humaneval,
    load_suite,
    load_suite_file,
)
from sandcrew.suites._outcomes import TaskOutcome, TaskResult, TaskStatus
from sandcrew.suites._pass_at_k import PassAtK, estimate_pass_at_k, pass_at_k
from sandcrew.suites._ray_executor import RayExecutor
from sandcrew.suites._reports import (
    StatusCounts,
    SuiteReport,
    read_json_report,
    write_json_report,
    write_junit,
)
from sandcrew.suites._runner import SuiteRecorder, run_suite
from sandcrew.suites._solvers import (
    CanonicalSolver,
    CompletionsSolver,
    CrewSolver,
    Solver,
    SolverName,
    make_solver,
)
from sandcrew.suites._tasks import (
    AnswerTask,
    CodeTask,
    ExactAnswer,
    NumberAnswer,
    RegexAnswer,
    Suite,
    Task,
)

__all__ = [
    "HUMANEVAL",
    "AnswerTask",
    "BaselineComparison",
    "CanonicalSolver",
    "CodeTask",
    "CompletionsSolver",
    "Confirmations",
    "CrewSolver",
    "Evaluation",
    "ExactAnswer",
    "Executor",
    "Isolation",
    "Job",
    "JobRun",
    "LocalExecutor",
    "NumberAnswer",
    "PassAtK",
    "RayExecutor",
    "RegexAnswer",
    "RelativeTimeLimit",
    "SampleResult",
    "SandboxFactory",
    "SealedCheck",
    "Solver",
    "SolverName",
    "StatusChange",
    "StatusCounts",
    "Suite",
    "SuiteError",
    "SuiteInfo",
    "SuiteRecorder",
    "SuiteReport",
    "Task",
    "TaskOutcome",
    "TaskResult",
    "TaskStatus",
    "answer_matches",
    "baseline_differences",
    "batch_container",
    "check_program",
    "compare_with_baseline",
    "container_per_run",
    "default_concurrency",
    "estimate_pass_at_k",
    "evaluate_functional_correctness",
    "evaluate_samples",
    "evaluate_task",
    "list_suites",
    "load_humaneval",
    "load_suite",
    "load_suite_file",
    "make_solver",
    "numbers_in",
    "pass_at_k",
    "read_json_report",
    "render_html_report",
    "run_suite",
    "seal_check",
    "write_html_report",
    "write_json_report",
    "write_junit",
]
