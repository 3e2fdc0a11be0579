"""Start-up of the ``sandcrew`` command line against ``docker run --rm`` of the same image.

Each path is one whole process, timed from spawn to exit: ``sandcrew --help``,
``sandcrew version``, ``sandcrew run hello.py`` (a file that prints hello), the
same program by ``docker run --rm`` of ``sandcrew/python:latest`` (with the default
network and with ``--network none``) and ``python -c pass`` (the interpreter's own start,
the floor of any Python command line). Every path gets ``--warmup`` unrecorded runs,
then ``--runs`` timed ones; the table shows median, p90 and the ratio to
``docker run --rm``. A run that exits non-zero or prints something else is counted as
failed and shown. Nothing is asserted.

Run it with the interpreter of the environment sandcrew is installed in, from the
repository root. ``--sandcrew PATH`` times another installation instead; ``--before PATH``
adds the sandcrew rows of a second installation (an older version, say) to the same run,
so both meet the same machine load::

    .venv/bin/python benchmarks/cli.py --runs 20
    .venv/bin/python benchmarks/cli.py --runs 20 --before ../old/.venv/bin/sandcrew
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import date
from pathlib import Path

from _bench import (
    BlockingRun,
    Contender,
    Measurement,
    Run,
    Unavailable,
    make_console,
    measure_latency,
    print_goal,
    print_latency_table,
    selected,
)
from _contenders import IMAGE, machine_facts
from rich.console import Console

HELLO = 'print("hello")\n'
DOCKER_RUN = "docker run --rm"
DOCKER_RUN_NO_NETWORK = "docker run --rm --network none"
SANDCREW_HELP = "sandcrew --help"
SANDCREW_RUN = "sandcrew run hello.py"
HELP_GOAL_MS = 150.0
RUN_GOAL_RATIO = 1.3


def process_run(command: Sequence[str], output: Callable[[str], str]) -> Run:
    """One run: start ``command``, wait for it; what it printed, as ``output`` picks it."""

    def call() -> str:
        completed = subprocess.run(
            list(command), capture_output=True, text=True, check=False, timeout=120
        )
        if completed.returncode != 0:
            last_line = (completed.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise RuntimeError(f"exit {completed.returncode}: {last_line}")
        return output(completed.stdout)

    return BlockingRun(call)


def first_line(text: str) -> str:
    return (text.splitlines() or [""])[0]


def whole(text: str) -> str:
    return text


def process(
    name: str, note: str, command: Sequence[str], expected: str, output: Callable[[str], str]
) -> Contender:
    @asynccontextmanager
    async def opened() -> AsyncIterator[Run]:
        if shutil.which(command[0]) is None:
            raise Unavailable(f"{command[0]} is not installed")
        yield process_run(command, output)

    return Contender(name, note, opened, expected_output=expected)


def sandcrew_paths(sandcrew: str, program: Path, *, label: str = "") -> list[Contender]:
    """``--help``, ``version`` and ``run hello.py`` of one installation."""
    version = subprocess.run(
        [sandcrew, "version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return [
        process(
            label + SANDCREW_HELP,
            "lists the commands without importing them",
            [sandcrew, "--help"],
            "Usage: sandcrew [OPTIONS] COMMAND [ARGS]...",
            first_line,
        ),
        process(label + "sandcrew version", "", [sandcrew, "version"], version or "?", whole),
        process(
            label + SANDCREW_RUN,
            "a new hardened container, no network (sandcrew's default)",
            [sandcrew, "run", str(program)],
            "hello",
            whole,
        ),
    ]


def contenders(sandcrew: str, program: Path, before: str | None) -> list[Contender]:
    in_image = ["python3", "-c", HELLO.strip()]
    floor = process(
        "python -c pass",
        "the interpreter's own start: the floor of any Python CLI",
        [sys.executable, "-c", "pass"],
        "",
        whole,
    )
    earlier = [] if before is None else sandcrew_paths(before, program, label="before: ")
    return [
        floor,
        *earlier,
        *sandcrew_paths(sandcrew, program),
        process(
            DOCKER_RUN,
            "the docker CLI, default network, no other hardening",
            ["docker", "run", "--rm", IMAGE, *in_image],
            "hello",
            whole,
        ),
        process(
            DOCKER_RUN_NO_NETWORK,
            "the docker CLI, no network, no other hardening",
            ["docker", "run", "--rm", "--network", "none", IMAGE, *in_image],
            "hello",
            whole,
        ),
    ]


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs per path (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs first (default 3)")
    parser.add_argument(
        "--sandcrew",
        default=str(Path(sys.executable).with_name("sandcrew")),
        help="the sandcrew executable to time (default: next to this interpreter)",
    )
    parser.add_argument(
        "--before",
        metavar="PATH",
        help="another sandcrew executable whose rows are added, marked before:",
    )
    parser.add_argument(
        "--only", action="append", default=[], help="keep paths whose name contains this"
    )
    arguments = parser.parse_args(argv)
    if arguments.runs < 1:
        parser.error("--runs must be >= 1")
    for option in ("sandcrew", "before"):
        path = getattr(arguments, option)
        if path is not None and not Path(path).is_file():
            parser.error(f"--{option} {path}: no such file")
    return arguments


async def measure_all(
    paths: list[Contender], arguments: argparse.Namespace, console: Console
) -> list[Measurement]:
    measurements = []
    for contender in paths:
        with console.status(f"{contender.name}: {arguments.runs} runs"):
            measurements.append(
                await measure_latency(contender, runs=arguments.runs, warmup=arguments.warmup)
            )
    return measurements


def print_goals(console: Console, measurements: list[Measurement]) -> None:
    """The start-up goals, as information."""
    median = {m.name: m.median * 1000 for m in measurements if m.median is not None}
    print_goal(
        console, f"{SANDCREW_HELP} ≤ {HELP_GOAL_MS:g} ms", median.get(SANDCREW_HELP), HELP_GOAL_MS
    )
    run = median.get(SANDCREW_RUN)
    for reference in (DOCKER_RUN, DOCKER_RUN_NO_NETWORK):
        budget = median.get(reference)
        print_goal(
            console,
            f"{SANDCREW_RUN} ≤ {RUN_GOAL_RATIO:g} × {reference} (ms)",
            run,
            None if budget is None else RUN_GOAL_RATIO * budget,
        )


def main(argv: list[str]) -> int:
    arguments = parse_arguments(argv)
    console = make_console()
    with tempfile.TemporaryDirectory() as folder:
        program = Path(folder) / "hello.py"
        program.write_text(HELLO, encoding="utf-8")
        paths = selected(contenders(arguments.sandcrew, program, arguments.before), arguments.only)
        measurements = asyncio.run(measure_all(paths, arguments, console))
    title = f"CLI start · {date.today()} · {machine_facts()} · {arguments.sandcrew}"
    print_latency_table(console, measurements, reference=DOCKER_RUN, title=title)
    print_goals(console, measurements)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
