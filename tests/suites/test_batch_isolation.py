"""Suites with batch isolation on real Docker: HumanEval passes, a cheat stays a failure."""

from __future__ import annotations

import pytest

from sandcrew.sandbox import SandboxConfig
from sandcrew.suites import (
    BatchCheckExecutor,
    CanonicalSolver,
    CodeCheck,
    CodeTask,
    LocalExecutor,
    TaskOutcome,
    TaskStatus,
    check_executor,
    load_suite,
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
    checks = [CodeCheck(task, completion) for completion in [*cheats, honest, honest, honest]]
    outcomes: dict[int, TaskOutcome] = {}
    executor = BatchCheckExecutor(SandboxConfig(timeout=5.0))
    await executor.check_all(checks, concurrency=2, on_outcome=outcomes.__setitem__)
    statuses = [outcomes[index].status for index in range(len(checks))]
    assert statuses == [TaskStatus.FAIL] * 3 + [TaskStatus.PASS] * 3, outcomes


def test_isolation_names_choose_the_executor() -> None:
    assert check_executor("batch").name == "batch container"
    assert check_executor("task").name == "container per check"
