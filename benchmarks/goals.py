"""The four speed goals of the run path, side by side in about a minute.

Each goal is a ratio of a sandcrew path to its floor, both measured in the same run,
their runs alternating (one of each, then again), so that both meet the same load:

- **cold**: ``DockerSandbox.run("print(1)")`` (a new hardened container) against a
  hardened throwaway made directly with Docker's SDK (create with the same hardening,
  start, wait, logs, remove, one after the other); goal ≤ 0.8×;
- **pooled**: the same with a pool, runs back to back, against an exec into one
  running container; goal ≤ 1.3×;
- **CLI**: ``python -m sandcrew run -`` of this checkout as a whole process (the program
  on stdin), with this checkout's warm process running (``sandcrew warm start``, in a
  runtime folder of the benchmark's own), against ``docker run --rm --network none`` of
  the same image; goal ≤ 1.3×. The same command in a process of its own (no warm
  process) is shown beside it, for information;
- **session cell**: ``print(1)`` as a cell of a started session against the exec;
  goal ≤ 0.2×.

Beside the cold goal, for information: the same engine calls as a cold run (``create``,
``attach``, ``start``, the output read as it comes, the removal in the background) with
none of sandcrew's work in the container, once with a Python supervisor that only forks
and execs ``python3 -c print(1)`` (two interpreters, as every run with a Python supervisor
and a real interpreter for its program) and once with that ``python3 -c print(1)`` alone,
the SDK's own program, read at its first line: the least any cold run whose program gets
an interpreter of its own can take on this engine, whatever runs it in the container.

Beside the CLI's goal, for information: a process of the same interpreter that only
imports the libraries the command line is built on (typer, pydantic-settings, Docker's
SDK), against the same ``docker run``: the least any ``sandcrew`` command takes.

It prints the medians and each ratio against its goal. It is information, never a
test: it exits 0 whatever the figures (a path that fails is shown as such). Run it
before and after a change that touches the run path, on a machine doing nothing else,
with the project's interpreter from the repository root::

    .venv/bin/python benchmarks/goals.py
    .venv/bin/python benchmarks/goals.py --runs 30    # steadier, about two minutes
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from _bench import AsyncRun, Run, make_console
from _contenders import (
    IMAGE,
    LABEL,
    POOL_SIZE,
    PROGRAM,
    SUPERVISED_BY_PYTHON,
    _sdk_throwaway,
    attached_throwaway,
    cleanup,
    exec_into_running,
    machine_facts,
)
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from sandcrew.sandbox import DockerSandbox

REPOSITORY = Path(__file__).resolve().parent.parent
"""The checkout whose sandcrew is measured (put first on the CLI process's path)."""
TURN = 5
"""Runs of one path before the other path's turn."""


@dataclass
class Timings:
    """Durations (seconds) of one path's runs and the first failure, if any."""

    name: str
    durations: list[float] = field(default_factory=list)
    failures: int = 0
    problem: str | None = None

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.durations) * 1000 if self.durations else None


@dataclass(frozen=True)
class Goal:
    """A ratio of two paths' medians and the most it may be."""

    name: str
    path: Timings
    floor: Timings
    at_most: float | None
    """``None`` for a row shown for information, beside the goals."""


Call = Callable[[], Awaitable[str]]


def as_call(run: Run) -> Call:
    """One run as a coroutine; a blocking run goes to a thread."""
    if isinstance(run, AsyncRun):
        return run.call
    return lambda: asyncio.to_thread(run.call)


async def timed(timings: Timings, call: Call, expected: str) -> None:
    started = time.perf_counter()
    output: str | Exception
    try:
        output = await call()
    except Exception as exc:  # a failed run is data: counted and shown
        output = exc
    elapsed = time.perf_counter() - started
    if isinstance(output, Exception) or output.strip() != expected:
        timings.failures += 1
        timings.problem = timings.problem or repr(output)[:200]
    else:
        timings.durations.append(elapsed)


async def alternate(*paths: tuple[Timings, Call], runs: int, warmup: int) -> None:
    """``warmup`` untimed runs of each path, then ``runs`` of each in turns of :data:`TURN`.

    Within a turn a path's runs are back to back (a pool is not given the other path's
    time to refill); turning often lets every path meet the same load.
    """
    for _, call in paths:
        for _ in range(warmup):
            await timed(Timings("warm-up"), call, "1")
    done = 0
    while done < runs:
        turn = min(TURN, runs - done)
        for timings, call in paths:
            for _ in range(turn):
                await timed(timings, call, "1")
        done += turn


def process_call(command: list[str], *, stdin: str = "", env: dict[str, str] | None = None) -> Call:
    def call() -> str:
        done = subprocess.run(
            command, input=stdin, capture_output=True, text=True, timeout=120, env=env, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"exit {done.returncode}: {done.stderr.strip()[-200:]}")
        return done.stdout

    return lambda: asyncio.to_thread(call)


def checkout_environment() -> dict[str, str]:
    """The environment of a process that runs this checkout's sandcrew.

    With the bytecode caches an installed sandcrew has: ``PYTHONDONTWRITEBYTECODE`` (set on
    some build machines) would make every run compile sandcrew's own modules again, ~60 of
    them; the warm-up runs write the caches (``__pycache__``, ignored by git).
    """
    environment = dict(os.environ)
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPOSITORY), environment.get("PYTHONPATH")])
    )
    return environment


def sandcrew_process(environment: dict[str, str]) -> Call:
    """``python -m sandcrew run -`` of this checkout, ``print(1)`` on stdin."""
    command = [sys.executable, "-m", "sandcrew", "run", "-"]
    return process_call(command, stdin=PROGRAM + "\n", env=environment)


@contextlib.contextmanager
def warm_environment() -> Iterator[dict[str, str]]:
    """The checkout's environment with its warm process running, in a runtime folder of
    this benchmark's own (stopped and removed at the end)."""
    folder = tempfile.mkdtemp(prefix="scbench")
    environment = {**checkout_environment(), "XDG_RUNTIME_DIR": folder}
    environment.pop("SANDCREW_WARM", None)
    sandcrew = [sys.executable, "-m", "sandcrew", "warm"]
    try:
        subprocess.run([*sandcrew, "start"], env=environment, check=True, capture_output=True)
        yield environment
    finally:
        subprocess.run([*sandcrew, "stop"], env=environment, check=False, capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def libraries_process() -> Call:
    """A process of the same interpreter that imports only the libraries the command line is
    built on (typer, pydantic-settings, Docker's SDK), with pydantic's plugins off as the
    command line has them: the least any ``sandcrew`` command can take before its work."""
    environment = checkout_environment()
    environment["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
    program = "import typer, pydantic_settings, docker; print(1)"
    return process_call([sys.executable, "-c", program], env=environment)


def docker_run_process() -> Call:
    command = ["docker", "run", "--rm", "--network", "none", "--label", f"{LABEL}=1"]
    return process_call([*command, IMAGE, "python3", "-c", PROGRAM])


async def measure(runs: int, warmup: int, console: Console) -> list[Goal]:
    # Imported here: the checkout's sandcrew, as the CLI process imports it.
    sys.path.insert(0, str(REPOSITORY))
    from sandcrew.sandbox import DockerSandbox, SandboxConfig

    goals = []
    sdk = Timings("SDK hardened throwaway")
    exec_floor = Timings("exec into a running container")
    two_interpreters = Timings("create, attach, start; a Python supervisor forks the program")
    one_interpreter = Timings("create, attach, start; the SDK's python3 -c prints")
    async with (
        _sdk_throwaway({"network_disabled": True})() as sdk_run,
        attached_throwaway(["python3", "-I", "-S", "-c", SUPERVISED_BY_PYTHON])() as supervised,
        attached_throwaway(["python3", "-c", PROGRAM])() as alone,
    ):
        with console.status("cold: sandcrew against the SDK's own sequence"):
            cold = Timings("sandcrew cold (DockerSandbox.run)")
            async with DockerSandbox(SandboxConfig()) as sandbox:
                await alternate(
                    (cold, lambda: sandbox_output(sandbox)),
                    (sdk, as_call(sdk_run)),
                    (two_interpreters, as_call(supervised)),
                    (one_interpreter, as_call(alone)),
                    runs=runs,
                    warmup=warmup,
                )
        goals.append(Goal("API cold run ÷ SDK hardened throwaway", cold, sdk, 0.8))
        # How low a cold run can go at all, sandcrew's calls with none of its work: the
        # program's interpreter after a Python supervisor's, and the program's alone.
        goals.append(Goal("least with a Python supervisor ÷ SDK", two_interpreters, sdk, None))
        goals.append(Goal("least for any cold run ÷ SDK", one_interpreter, sdk, None))

    async with exec_into_running() as exec_run:
        exec_call = as_call(exec_run)
        with console.status("pooled: sandcrew's pool against an exec"):
            pooled = Timings(f"sandcrew pooled, back to back (pool of {POOL_SIZE})")
            async with DockerSandbox(SandboxConfig(pool_size=POOL_SIZE)) as sandbox:
                await alternate(
                    (pooled, lambda: sandbox_output(sandbox)),
                    (exec_floor, exec_call),
                    runs=runs,
                    warmup=warmup,
                )
        goals.append(Goal("pooled back to back ÷ exec", pooled, exec_floor, 1.3))

        with console.status("session cell against an exec"):
            cell = Timings("session cell print(1)")
            cell_floor = Timings("exec into a running container (again)")
            async with DockerSandbox() as sandbox, sandbox.session() as session:

                async def one_cell() -> str:
                    return str((await session.run(PROGRAM)).stdout)

                await alternate((cell, one_cell), (cell_floor, exec_call), runs=runs, warmup=warmup)
        goals.append(Goal("session cell ÷ exec", cell, cell_floor, 0.2))

    with (
        console.status("CLI: sandcrew run - against docker run --rm --network none"),
        warm_environment() as warm,
    ):
        cli = Timings("sandcrew run - (a process, warm)")
        alone = Timings("sandcrew run - (a process of its own)")
        docker_cli = Timings("docker run --rm --network none (a process)")
        libraries = Timings("typer, pydantic-settings and Docker's SDK imported (a process)")
        await alternate(
            (cli, sandcrew_process(warm)),
            (alone, sandcrew_process({**checkout_environment(), "SANDCREW_WARM": "0"})),
            (docker_cli, docker_run_process()),
            (libraries, libraries_process()),
            runs=runs,
            warmup=warmup,
        )
    goals.append(Goal("sandcrew run - ÷ docker run --rm --network none", cli, docker_cli, 1.3))
    goals.append(Goal("without a warm process ÷ docker run --rm", alone, docker_cli, None))
    # What no `sandcrew` command can go below: shown beside the CLI's goal, not a goal.
    goals.append(Goal("its libraries alone ÷ docker run --rm", libraries, docker_cli, None))
    return goals


async def sandbox_output(sandbox: DockerSandbox) -> str:
    result = await sandbox.run(PROGRAM)
    if result.exit_code != 0:
        raise RuntimeError(f"exit code {result.exit_code}: {result.stderr or result.stdout}")
    return str(result.stdout)


def print_goals(console: Console, goals: list[Goal], title: str) -> None:
    table = Table(title=title)
    for column in ("goal", "path", "median ms", "floor", "median ms", "ratio", "at most", ""):
        table.add_column(column, justify="right" if column in {"median ms", "ratio"} else "left")
    for goal in goals:
        path, floor = goal.path.median_ms, goal.floor.median_ms
        ratio = None if path is None or floor is None or floor <= 0 else path / floor
        if ratio is None:
            verdict = "[yellow]not measured[/]"
        elif goal.at_most is None:
            verdict = "information"
        else:
            verdict = "[green]met[/]" if ratio <= goal.at_most else "[red]not met[/]"
        table.add_row(
            goal.name,
            goal.path.name,
            "-" if path is None else f"{path:,.1f}",
            goal.floor.name,
            "-" if floor is None else f"{floor:,.1f}",
            "-" if ratio is None else f"{ratio:.2f}×",
            "-" if goal.at_most is None else f"{goal.at_most:g}×",
            verdict,
        )
    console.print(table)
    for goal in goals:
        for timings in (goal.path, goal.floor):
            if timings.failures:
                console.print(
                    f"[red]{timings.name}: {timings.failures} runs failed[/]; first: "
                    f"{timings.problem}"
                )


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs per path (default 15)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    arguments = parser.parse_args(argv)
    if arguments.runs < 1:
        parser.error("--runs must be >= 1")
    return arguments


def main(argv: list[str]) -> int:
    arguments = parse_arguments(argv)
    console = make_console()
    started = time.monotonic()
    try:
        goals = asyncio.run(measure(arguments.runs, arguments.warmup, console))
    except Exception as exc:  # information only: say why, exit 0
        console.print(f"[red]the goals could not be measured[/]: {type(exc).__name__}: {exc}")
        return 0
    finally:
        for problem in cleanup():
            console.print(f"[yellow]could not clean up {problem}[/]")
    load = os.getloadavg()[0]
    title = (
        f"speed goals · {date.today()} · {machine_facts()} · load average {load:.1f} · "
        f"{arguments.runs} runs each · {time.monotonic() - started:.0f} s"
    )
    print_goals(console, goals, title)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
