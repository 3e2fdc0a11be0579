"""Throughput of ``print(1)`` runs at a fixed concurrency: sandcrew against its peers.

Each path first does one unrecorded round of ``--concurrency`` runs, then
``--runs`` runs (default 60) with ``--concurrency`` (default 4) in flight at
once: asyncio tasks for sandcrew and autogen-ext, a thread pool for the peers
with a blocking API. The table shows runs per second over the wall time, the
median single-run time under that load, and the ratio of each rate to
sandcrew's cold runs. Every run must print "1"; other outputs and exceptions
are counted as failures. Paths that wait ~10 s per run in ``docker stop`` are
left out. Nothing is asserted.

Run from the repository root with the benchmark environment (see docs/scale.md)::

    .bench-venv/bin/python benchmarks/throughput.py
    .bench-venv/bin/python benchmarks/throughput.py --runs 120 --concurrency 8
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import date

from _bench import (
    Measurement,
    make_console,
    measure_throughput,
    print_goal,
    print_throughput_table,
    selected,
)
from _contenders import ALL, SANDCREW_COLD, cleanup, machine_facts
from rich.console import Console


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=60, help="timed runs per path (default 60)")
    parser.add_argument("--concurrency", type=int, default=4, help="runs in flight (default 4)")
    parser.add_argument(
        "--only", action="append", default=[], help="keep paths whose name contains this"
    )
    arguments = parser.parse_args(argv)
    if arguments.runs < 1 or arguments.concurrency < 1:
        parser.error("--runs and --concurrency must be >= 1")
    return arguments


async def measure_all(arguments: argparse.Namespace, console: Console) -> list[Measurement]:
    measurements = []
    for contender in selected(ALL, arguments.only):
        if contender.latency_only:
            continue
        if contender.slow:
            skipped = Measurement(contender.name, contender.note)
            skipped.unavailable = "skipped: ~10 s per run (see latency.py)"
            measurements.append(skipped)
            continue
        with console.status(f"{contender.name}: {arguments.runs} runs"):
            measurements.append(
                await measure_throughput(
                    contender, runs=arguments.runs, concurrency=arguments.concurrency
                )
            )
    return measurements


def print_goals(console: Console, measurements: list[Measurement]) -> None:
    """The throughput goal of the product spec, as information (higher is better)."""
    rate = {m.name: m.runs_per_second for m in measurements if m.runs_per_second is not None}
    epicbox = rate.get("epicbox run()")
    target = None if epicbox is None else 1.5 * epicbox
    for name in (SANDCREW_COLD, "sandcrew pooled"):
        # print_goal reads "left ≤ right": the target must not exceed what sandcrew does.
        print_goal(console, f"1.5 × epicbox ≤ {name} (runs/s)", target, rate.get(name))


def main(argv: list[str]) -> int:
    arguments = parse_arguments(argv)
    console = make_console()
    try:
        measurements = asyncio.run(measure_all(arguments, console))
    finally:
        for problem in cleanup():
            console.print(f"[yellow]could not clean up {problem}[/]")
    title = (
        f"print(1) throughput, {arguments.runs} runs at concurrency {arguments.concurrency}"
        f" · {date.today()} · {machine_facts()}"
    )
    print_throughput_table(console, measurements, reference=SANDCREW_COLD, title=title)
    print_goals(console, measurements)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
