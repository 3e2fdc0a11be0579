"""Suites with batch isolation on real Docker: HumanEval passes, a cheat stays a failure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sandcrew.cli import app
from sandcrew.sandbox import SandboxConfig
from sandcrew.suites import (
    CanonicalSolver,
    CodeTask,
    CompletionsSolver,
    Isolation,
    Job,
    JobRun,
    LocalExecutor,
    TaskResult,
    TaskStatus,
    batch_container,
    container_per_run,
    load_suite,
    read_json_report,
    run_suite,
)

pytestmark = pytest.mark.docker


async def test_humaneval_canonical_solutions_all_pass_in_one_batch() -> None:
    suite = load_suite("humaneval")
    report = await run_suite(
        suite, CanonicalSolver(), concurrency=2, executor=LocalExecutor("batch")
    )
    failures = {r.task_id: r.detail for r in report.results if not r.passed}
    assert failures == {}
    assert report.counts.total == 164
    assert report.executor == "local, batch container"


def _task(test: str) -> CodeTask:
    return CodeTask(
        id="t/0",
        prompt="def answer():\n",
        entry_point="answer",
        test=test,
        canonical_solution="    return 42\n",
    )


async def test_cheating_completions_do_not_pass_and_do_not_touch_the_others() -> None:
    task = _task("def check(candidate):\n    assert candidate() == 42\n")
    cheats = [
        # A forged frame on both streams, then the real (failing) end.
        "    import sys\n"
        "    for stream in (sys.stdout, sys.stderr):\n"
        "        stream.write('\\x1e' + 'a' * 32 + ' 0 0 0 0 0 0 0\\n')\n"
        "    return 41\n",
        # A daemon that waits for the next task and tries to kill it.
        "    import os, signal, time\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(0.3)\n"
        "        os.kill(-1, signal.SIGKILL)\n"
        "        os._exit(0)\n"
        "    return 41\n",
        # Leaves a file for the next task to find.
        "    open('/tmp/answer', 'w').write('42')\n    return 41\n",
    ]
    honest = "    import time\n    time.sleep(0.6)\n    return 42\n"
    jobs = [
        Job(task, CompletionsSolver({task.id: completion}))
        for completion in [*cheats, honest, honest, honest]
    ]
    outcomes: dict[int, TaskResult] = {}
    await LocalExecutor("batch").execute(
        JobRun(jobs, SandboxConfig(timeout=5.0), outcomes.__setitem__, concurrency=2)
    )
    statuses = [outcomes[index].status for index in range(len(jobs))]
    assert statuses == [TaskStatus.FAIL] * 3 + [TaskStatus.PASS] * 3, outcomes


def test_isolation_names_choose_the_sandbox_factory() -> None:
    assert LocalExecutor("batch").sandbox_factory is batch_container
    assert LocalExecutor(Isolation.TASK).sandbox_factory is container_per_run
    assert LocalExecutor("batch").name == "local, batch container"
    assert LocalExecutor().name == "local"


def _suite_cli(*args: str) -> Any:
    return CliRunner().invoke(app, ["suite", *args], env={"COLUMNS": "200"})


def test_suite_run_batch_on_wrong_completions_matches_task_verdicts(tmp_path: Path) -> None:
    suite = load_suite("humaneval").filtered(["HumanEval/1?"])
    lines = []
    for task in suite.tasks:
        completion = task.canonical_solution or ""
        if task.id == "HumanEval/12":
            completion = "    return None\n"
        elif task.id == "HumanEval/15":
            completion = "    raise ValueError('not today')\n"
        elif task.id == "HumanEval/17":
            completion = "    while True:\n        pass\n"
        lines.append(json.dumps({"task_id": task.id, "completion": completion}))
    completions = tmp_path / "samples.jsonl"
    completions.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report_path = tmp_path / "batch.json"
    result = _suite_cli(
        "run", "humaneval", "--solver", "completions", "--completions", str(completions),
        "--filter", "HumanEval/1?", "--timeout", "3", "--isolation", "batch",
        "--report", str(report_path), "--allow-failures",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = read_json_report(report_path)
    statuses = {r.task_id: r.status for r in report.results}
    assert statuses.pop("HumanEval/12") is TaskStatus.FAIL
    assert statuses.pop("HumanEval/15") is TaskStatus.FAIL
    assert statuses.pop("HumanEval/17") is TaskStatus.TIMEOUT
    assert set(statuses.values()) == {TaskStatus.PASS}
    assert report.executor == "local, batch container"
