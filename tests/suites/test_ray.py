"""The Ray executor: the same verdicts as the local one, from a local Ray instance."""

from __future__ import annotations

import pytest

from sandcrew.suites import (
    CanonicalSolver,
    LocalExecutor,
    RayExecutor,
    SuiteReport,
    load_suite,
    run_suite,
)
from tests.suites.conftest import WriteFile

pytestmark = [pytest.mark.docker, pytest.mark.ray]


async def test_ray_executor_reports_like_the_local_one(write_file: WriteFile) -> None:
    import ray

    suite = load_suite(
        write_file(
            "small.yaml",
            """
            - {id: fib, prompt: p, expected: 63245986, solution: "print(63245986)"}
            - {id: wrong, prompt: p, expected: 2, solution: "print(3)"}
            - {id: unsolved, prompt: p, expected: 2}
            - id: add
              kind: code
              prompt: "def add(a, b):\\n"
              entry_point: add
              test: "def check(c):\\n    assert c(2, 3) == 5\\n"
              canonical_solution: "    return a + b\\n"
            - id: sub
              kind: code
              prompt: "def sub(a, b):\\n"
              entry_point: sub
              test: "def check(c):\\n    assert c(2, 3) == -1\\n"
              canonical_solution: "    return b - a\\n"
            """,
        )
    )
    local = await run_suite(suite, CanonicalSolver(), concurrency=2, executor=LocalExecutor())
    distributed = await run_suite(
        suite, CanonicalSolver(), concurrency=2, executor=RayExecutor(num_cpus=2)
    )
    assert not ray.is_initialized()  # the executor shut down the Ray it started

    def verdicts(report: SuiteReport) -> list[tuple[str, str, int]]:
        return [(r.task_id, r.status.value, r.container_runs) for r in report.results]

    assert (
        verdicts(distributed)
        == verdicts(local)
        == [
            ("fib", "pass", 1),
            ("wrong", "fail", 1),
            ("unsolved", "error", 0),
            ("add", "pass", 1),
            ("sub", "fail", 1),
        ]
    )
    assert distributed.counts == local.counts
    assert (local.executor, distributed.executor) == ("local", "ray")
    assert distributed.result_for("sub").detail.endswith("AssertionError")
