"""run_suite on real Docker: verdicts, statuses, the crew adapter, and cancellation."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sandcrew.sandbox import SandboxConfig
from sandcrew.suites import (
    CanonicalSolver,
    CompletionsSolver,
    SuiteRecorder,
    TaskResult,
    TaskStatus,
    load_suite,
    read_json_report,
    run_suite,
    write_json_report,
)
from tests.suites.conftest import WriteFile

pytestmark = pytest.mark.docker


async def test_basics_passes_with_the_canonical_solver() -> None:
    suite = load_suite("basics")
    seen: list[TaskResult] = []
    report = await run_suite(suite, CanonicalSolver(), concurrency=2, on_result=seen.append)
    failures = {r.task_id: r.detail for r in report.results if not r.passed}
    assert failures == {}
    assert [r.task_id for r in report.results] == [task.id for task in suite.tasks]
    assert len(seen) == len(suite.tasks)
    assert all(r.container_runs == 1 for r in report.results)
    assert (report.suite, report.solver, report.executor) == ("basics", "canonical", "local")


async def test_each_status_and_its_detail(write_file: WriteFile) -> None:
    suite = load_suite(
        write_file(
            "statuses.yaml",
            """
            - id: right
              prompt: p
              expected: 4
              solution: print(2 + 2)
            - id: wrong-answer
              prompt: p
              expected: 4
              solution: print(5)
            - id: crashes
              prompt: p
              expected: 4
              solution: raise SystemExit("no idea")
            - id: loops
              prompt: p
              expected: 4
              timeout: 1
              solution: "while True: pass"
            - id: no-solution
              prompt: p
              expected: 4
            - id: code-fails
              kind: code
              prompt: "def f():\\n"
              entry_point: f
              test: "def check(c):\\n    assert c() == 1, 'f() should be 1'\\n"
              canonical_solution: "    return 2\\n"
            """,
        )
    )
    report = await run_suite(suite, CanonicalSolver(), concurrency=3)
    by_id = {r.task_id: r for r in report.results}
    assert {task_id: r.status for task_id, r in by_id.items()} == {
        "right": TaskStatus.PASS,
        "wrong-answer": TaskStatus.FAIL,
        "crashes": TaskStatus.FAIL,
        "loops": TaskStatus.TIMEOUT,
        "no-solution": TaskStatus.ERROR,
        "code-fails": TaskStatus.FAIL,
    }
    assert by_id["wrong-answer"].detail == "expected the number 4, got '5'"
    assert by_id["crashes"].detail == "no idea"
    assert by_id["loops"].detail == "timed out after 1s"
    assert "has no solution" in by_id["no-solution"].detail
    assert by_id["no-solution"].container_runs == 0
    assert by_id["code-fails"].detail.endswith("AssertionError: f() should be 1")


async def test_sandbox_timeout_applies_to_tasks_without_their_own(write_file: WriteFile) -> None:
    suite = load_suite(
        write_file(
            "slow.yaml",
            """
            - {id: slow, prompt: p, expected: 1, solution: "import time; time.sleep(5); print(1)"}
            """,
        )
    )
    # The solution sleeps 5 s: within the default limit (10 s), past the sandbox's 1 s.
    report = await run_suite(suite, CanonicalSolver(), sandbox_config=SandboxConfig(timeout=1))
    assert report.results[0].status is TaskStatus.TIMEOUT


async def test_wrong_completions_fail_exactly_where_expected() -> None:
    suite = load_suite("humaneval").filtered(["HumanEval/2?"])
    completions = {task.id: task.canonical_solution or "" for task in suite.tasks}
    completions["HumanEval/21"] = "    return numbers\n"  # wrong value
    completions["HumanEval/23"] = "    return len(string) +\n"  # syntax error
    del completions["HumanEval/27"]  # missing from the file
    # A whole function instead of a body; it relies on the prompt's `typing` import.
    completions["HumanEval/20"] = (
        "def find_closest_elements(numbers: List[float]) -> Tuple[float, float]:\n"
        + completions["HumanEval/20"]
    )
    report = await run_suite(suite, CompletionsSolver(completions, source="mine.jsonl"))
    statuses = {r.task_id: r.status for r in report.results}
    assert {task_id for task_id, s in statuses.items() if s is not TaskStatus.PASS} == {
        "HumanEval/21",
        "HumanEval/23",
        "HumanEval/27",
    }
    assert statuses["HumanEval/21"] is TaskStatus.FAIL
    assert statuses["HumanEval/23"] is TaskStatus.FAIL
    assert "SyntaxError" in report.result_for("HumanEval/23").detail
    assert statuses["HumanEval/27"] is TaskStatus.ERROR
    assert (
        report.result_for("HumanEval/27").detail == "no completion for 'HumanEval/27' in mine.jsonl"
    )


async def test_cancelling_keeps_finished_results_and_leaves_no_container(
    write_file: WriteFile, tmp_path: Path, list_own_containers: Callable[[], list[str]]
) -> None:
    quick = "".join(
        f"- {{id: quick-{n}, prompt: p, expected: {n}, solution: 'print({n})'}}\n" for n in range(2)
    )
    slow = "".join(
        f"- {{id: slow-{n}, prompt: p, expected: 1, timeout: 60,"
        f" solution: 'import time; time.sleep(60); print(1)'}}\n"
        for n in range(6)
    )
    suite = load_suite(write_file("mixed.yaml", quick + slow))
    recorder = SuiteRecorder(suite, solver="canonical", executor="local")
    two_done = asyncio.Event()

    def on_result(result: TaskResult) -> None:
        if recorder.finished >= 2:
            two_done.set()

    running = asyncio.create_task(
        run_suite(suite, CanonicalSolver(), concurrency=3, on_result=on_result, recorder=recorder)
    )
    await asyncio.wait_for(two_done.wait(), timeout=30)
    deadline = time.monotonic() + 60
    while not list_own_containers():  # the slow programs start in their containers
        assert time.monotonic() < deadline, "slow tasks should be running in containers now"
        await asyncio.sleep(0.1)
    started = time.monotonic()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    # Sooner than the slow programs' 60 s: they were stopped, not waited for (the bound
    # leaves a busy shared engine its seconds per removal).
    assert time.monotonic() - started < 50

    report = recorder.report(interrupted=True)
    assert [r.task_id for r in report.results] == ["quick-0", "quick-1"]
    assert all(r.passed for r in report.results)
    assert report.interrupted
    assert report.not_run == tuple(f"slow-{n}" for n in range(6))
    path = tmp_path / "partial.json"
    write_json_report(report, path)
    assert read_json_report(path).counts.not_run == 6
    assert list_own_containers() == []


async def test_concurrency_must_be_positive() -> None:
    from sandcrew.suites import SuiteError

    with pytest.raises(SuiteError, match=r"concurrency must be at least 1 \(got 0\)"):
        await run_suite(load_suite("basics"), CanonicalSolver(), concurrency=0)
