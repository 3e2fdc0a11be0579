"""Latency of one ``print(1)`` run, path by path: sandcrew, its peers and the floors.

Each path gets 3 unrecorded warm-up runs, then ``--runs`` runs (default 30)
one after another; the table shows the median and p90 in milliseconds and the
ratio of each median to sandcrew's cold run. Every run's output must be "1":
runs that print anything else or raise are counted as failures and shown.
Paths that take ~10 s per run (they wait in ``docker stop``) get
``--slow-runs`` runs (default 5) after one warm-up. Nothing is asserted.

Run from the repository root with the benchmark environment (see docs/scale.md)::

    .bench-venv/bin/python benchmarks/latency.py
    .bench-venv/bin/python benchmarks/latency.py --runs 10 --only sandcrew --only epicbox
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import date

from _bench import (
    Measurement,
    make_console,
    measure_latency,
    print_goal,
    print_latency_table,
    selected,
)
from _contenders import ALL, SANDCREW_COLD, SANDCREW_POOLED_SPACED, cleanup, machine_facts
from rich.console import Console


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="timed runs per path (default 30)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs first (default 3)")
    parser.add_argument(
        "--slow-runs", type=int, default=5, help="timed runs of the ~10 s paths (default 5)"
    )
    parser.add_argument(
        "--only", action="append", default=[], help="keep paths whose name contains this"
    )
    arguments = parser.parse_args(argv)
    for name in ("runs", "slow_runs"):
        if getattr(arguments, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    return arguments


async def measure_all(arguments: argparse.Namespace, console: Console) -> list[Measurement]:
    measurements = []
    for contender in selected(ALL, arguments.only):
        runs, warmup = arguments.runs, arguments.warmup
        if contender.slow:
            runs, warmup = arguments.slow_runs, min(warmup, 1)
        with console.status(f"{contender.name}: {runs} runs"):
            measurements.append(await measure_latency(contender, runs=runs, warmup=warmup))
    return measurements


def print_goals(console: Console, measurements: list[Measurement]) -> None:
    """The latency goals of the product spec, as information."""
    median = {m.name: m.median * 1000 for m in measurements if m.median is not None}
    cold, pooled = median.get(SANDCREW_COLD), median.get("sandcrew pooled")
    warm_exec = median.get("exec into running container")
    print_goal(console, "sandcrew cold ≤ epicbox (ms)", cold, median.get("epicbox run()"))
    exec_budget = None if warm_exec is None else 1.5 * warm_exec
    print_goal(console, "sandcrew pooled ≤ 1.5 × warm exec (ms)", pooled, exec_budget)
    spaced = median.get(SANDCREW_POOLED_SPACED)
    print_goal(console, "sandcrew pooled, runs apart ≤ 1.5 × warm exec (ms)", spaced, exec_budget)
    if pooled is not None:
        fastest_peer = min(
            (value for name, value in median.items() if not name.startswith(("sandcrew", "bare"))),
            default=None,
        )
        print_goal(console, "sandcrew pooled ≤ every container peer (ms)", pooled, fastest_peer)


def main(argv: list[str]) -> int:
    arguments = parse_arguments(argv)
    console = make_console()
    try:
        measurements = asyncio.run(measure_all(arguments, console))
    finally:
        for problem in cleanup():
            console.print(f"[yellow]could not clean up {problem}[/]")
    title = f"print(1) latency · {date.today()} · {machine_facts()}"
    print_latency_table(console, measurements, reference=SANDCREW_COLD, title=title)
    print_goals(console, measurements)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
