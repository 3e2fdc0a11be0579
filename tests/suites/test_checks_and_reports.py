"""Pure parts: answer checks, the check program, reports, JUnit XML, baselines, solvers."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

import sandcrew
import sandcrew.suites
from sandcrew.agents import ModelEndpoint
from sandcrew.crew import CrewSettings
from sandcrew.suites import (
    CanonicalSolver,
    CodeTask,
    CompletionsSolver,
    CrewSolver,
    ExactAnswer,
    NumberAnswer,
    RayExecutor,
    RegexAnswer,
    SuiteError,
    SuiteReport,
    TaskResult,
    TaskStatus,
    answer_matches,
    baseline_differences,
    check_program,
    compare_with_baseline,
    load_suite,
    make_solver,
    numbers_in,
    read_json_report,
    run_suite,
    write_json_report,
    write_junit,
)


@pytest.mark.parametrize(
    ("expected", "text", "matches"),
    [
        (NumberAnswer(number=Decimal(63245986)), "The 39th Fibonacci number is 63245986.", True),
        (NumberAnswer(number=Decimal(63245986)), "It is 63,245,986", True),
        (NumberAnswer(number=Decimal(63245986)), "fib(39) = 39088169", False),
        (NumberAnswer(number=Decimal(63245986)), "no numbers here", False),
        (NumberAnswer(number=Decimal(21)), "gcd(1071, 462) = 21", True),
        (NumberAnswer(number=Decimal("1.414214"), tolerance=Decimal("1e-6")), "≈ 1.4142136", True),
        (NumberAnswer(number=Decimal("1.414214"), tolerance=Decimal("1e-6")), "1.4142", False),
        (NumberAnswer(number=Decimal(-3)), "x = -3", True),
        (NumberAnswer(number=Decimal(1000)), "1e3", True),
        (ExactAnswer(exact="wercdnas"), "  wercdnas\n", True),
        (ExactAnswer(exact="wercdnas"), "The answer is wercdnas", False),
        (RegexAnswer(regex=r"\b2024-04-10\b"), "It is 2024-04-10.", True),
        (RegexAnswer(regex=r"\b2024-04-10\b"), "2024-04-100", False),
    ],
    ids=lambda value: str(value)[:30] if isinstance(value, str) else None,
)
def test_answer_matching(
    expected: ExactAnswer | NumberAnswer | RegexAnswer, text: str, matches: bool
) -> None:
    assert answer_matches(expected, text) is matches


def test_numbers_in_keeps_lists_apart() -> None:
    assert numbers_in("1,2,3 and 4,000 and 2.5e-1") == [
        Decimal(1),
        Decimal(2),
        Decimal(3),
        Decimal(4000),
        Decimal("0.25"),
    ]


def test_check_program_is_prompt_completion_and_test() -> None:
    task = CodeTask(
        id="t", prompt="def f():\n", entry_point="f", test="def check(c):\n    assert c() == 1\n"
    )
    # The harness calls check(f) itself, so that it knows check returned.
    assert check_program(task, "    return 1\n") == (
        "def f():\n    return 1\n\n\ndef check(c):\n    assert c() == 1\n\n"
    )


def test_a_whole_function_completion_follows_the_closed_prompt() -> None:
    task = CodeTask(id="t", prompt="import math\ndef f():\n", entry_point="f", test="")
    program = check_program(task, "def f():\n    return math.pi\n")
    assert program.startswith("import math\ndef f():\n    pass\n\n\ndef f():\n    return math.pi\n")


def _result(task_id: str, status: TaskStatus, detail: str = "") -> TaskResult:
    return TaskResult(task_id=task_id, kind="code", status=status, duration=0.5, detail=detail)


def _report(*results: TaskResult, not_run: tuple[str, ...] = ()) -> SuiteReport:
    return SuiteReport(
        suite="demo",
        source="demo.yaml",
        solver="canonical",
        executor="local",
        started_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        duration=2.0,
        interrupted=bool(not_run),
        not_run=not_run,
        results=results,
    )


def test_json_report_round_trips_with_counts(tmp_path: Path) -> None:
    report = _report(
        _result("a", TaskStatus.PASS),
        _result("b", TaskStatus.FAIL, "AssertionError"),
        _result("c", TaskStatus.TIMEOUT),
        _result("d", TaskStatus.ERROR, "no completion"),
    )
    path = tmp_path / "report.json"
    write_json_report(report, path)
    again = read_json_report(path)
    assert again == report
    counts = again.counts
    assert (counts.total, counts.passed, counts.failed, counts.timeouts, counts.errors) == (
        4,
        1,
        1,
        1,
        1,
    )
    assert not again.all_passed


def test_reading_something_else_as_a_report_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text('{"hello": 1}', encoding="utf-8")
    with pytest.raises(SuiteError, match=r"other\.json is not a sandcrew suite report"):
        read_json_report(path)
    with pytest.raises(SuiteError, match=r"Cannot read report .*missing\.json"):
        read_json_report(tmp_path / "missing.json")


def test_junit_counts_and_elements(tmp_path: Path) -> None:
    report = _report(
        _result("a", TaskStatus.PASS),
        _result("b", TaskStatus.FAIL, "Traceback...\nAssertionError: \x1b[31mbad\x00"),
        _result("c", TaskStatus.TIMEOUT, "timed out after 2s"),
        _result("d", TaskStatus.ERROR, "no completion"),
        not_run=("e",),
    )
    path = tmp_path / "junit.xml"
    write_junit(report, path)
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    assert {key: suite.get(key) for key in ("tests", "failures", "errors", "skipped")} == {
        "tests": "5",
        "failures": "2",
        "errors": "1",
        "skipped": "1",
    }
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert list(cases) == ["a", "b", "c", "d", "e"]
    assert len(cases["a"]) == 0
    failure = cases["b"].find("failure")
    assert failure is not None
    assert failure.get("message") == "AssertionError: \ufffd[31mbad\ufffd"
    timeout = cases["c"].find("failure")
    assert timeout is not None
    assert timeout.get("type") == "timeout"
    assert cases["d"].find("error") is not None
    assert cases["e"].find("skipped") is not None


def test_baseline_comparison_finds_regressions_fixes_and_the_rest() -> None:
    baseline = _report(
        _result("stays-green", TaskStatus.PASS),
        _result("regresses", TaskStatus.PASS),
        _result("times-out-now", TaskStatus.PASS),
        _result("gets-fixed", TaskStatus.FAIL),
        _result("stays-red", TaskStatus.ERROR),
        _result("dropped", TaskStatus.PASS),
    )
    current = _report(
        _result("stays-green", TaskStatus.PASS),
        _result("regresses", TaskStatus.FAIL, "AssertionError"),
        _result("times-out-now", TaskStatus.TIMEOUT),
        _result("gets-fixed", TaskStatus.PASS),
        _result("stays-red", TaskStatus.FAIL),
        _result("brand-new", TaskStatus.FAIL),
    )
    comparison = compare_with_baseline(current, baseline)
    assert [(c.task_id, c.before, c.after) for c in comparison.regressions] == [
        ("regresses", TaskStatus.PASS, TaskStatus.FAIL),
        ("times-out-now", TaskStatus.PASS, TaskStatus.TIMEOUT),
    ]
    assert comparison.regressions[0].detail == "AssertionError"
    assert [c.task_id for c in comparison.fixes] == ["gets-fixed"]
    assert comparison.still_failing == ("stays-red",)
    assert comparison.new_tasks == ("brand-new",)
    assert comparison.missing_tasks == ("dropped",)
    assert comparison.has_regressions
    assert not compare_with_baseline(baseline, baseline).has_regressions


def test_make_solver_by_name(tmp_path: Path) -> None:
    assert isinstance(make_solver("canonical"), CanonicalSolver)
    settings = CrewSettings(endpoint=ModelEndpoint(model="m", base_url="http://127.0.0.1:9/v1"))
    crew = make_solver("crew", crew_settings=lambda: settings)
    assert isinstance(crew, CrewSolver)
    assert crew.settings is settings
    with pytest.raises(SuiteError, match="needs model settings"):
        make_solver("crew")
    path = tmp_path / "c.jsonl"
    path.write_text('{"task_id": "a", "completion": "x"}\n', encoding="utf-8")
    completions = make_solver("completions", completions=path)
    assert isinstance(completions, CompletionsSolver)
    assert completions.completions == {"a": "x"}


def test_unknown_solver_lists_the_solvers() -> None:
    with pytest.raises(SuiteError) as caught:
        make_solver("oracle")
    assert (
        str(caught.value) == "Unknown solver 'oracle'; choose one of: canonical, completions, crew"
    )


def test_solver_options_that_do_not_fit(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="needs --completions FILE"):
        make_solver("completions")
    with pytest.raises(SuiteError, match="--completions only applies to --solver completions"):
        make_solver("canonical", completions=tmp_path / "c.jsonl")


def test_bad_completions_file_names_lines(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(
        '{"task_id": "a", "completion": "x"}\n'
        "not json\n"
        '{"completion": "x"}\n'
        '{"task_id": "a", "completion": "y"}\n',
        encoding="utf-8",
    )
    with pytest.raises(SuiteError) as caught:
        CompletionsSolver.from_file(path)
    message = str(caught.value)
    assert "line 2: not valid JSON" in message
    assert "line 3: field 'task_id' is missing" in message
    assert "line 4: task_id 'a' already has a completion on line 1" in message


async def test_ray_executor_without_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    with pytest.raises(
        SuiteError, match=r"--executor ray needs Ray: pip install 'sandcrew\[ray\]'"
    ):
        await run_suite(load_suite("basics"), CanonicalSolver(), executor=RayExecutor())


def test_suite_error_belongs_to_the_product_hierarchy() -> None:
    # Which names sandcrew.suites publishes: tests/test_public_surface.py.
    assert issubclass(sandcrew.suites.SuiteError, sandcrew.UserError)


def test_baseline_differences_name_both_values_and_a_run_without_a_model() -> None:
    baseline = _report().model_copy(update={"model": "gpt-4o-mini", "sandcrew_version": "0.1"})

    assert baseline_differences(baseline, model="gpt-4o-mini", sandcrew_version="0.1") == []
    assert baseline_differences(baseline, model="other", sandcrew_version="0.2") == [
        "model 'gpt-4o-mini' (now 'other')",
        "sandcrew 0.1 (now 0.2)",
    ]
    assert baseline_differences(baseline, model=None, sandcrew_version="0.1") == [
        "model 'gpt-4o-mini' (now no model)"
    ]
