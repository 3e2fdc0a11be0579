"""E2B's SDK on `sandcrew e2b` against a direct session: what the compatibility costs.

- **Cell round trip through the SDK**: ``Sandbox.run_code("print(1)")`` of the unmodified
  ``e2b_code_interpreter`` SDK against a `sandcrew e2b` this script starts on loopback
  (one HTTP request, the cell's NDJSON answer streamed back). Median of ``--runs``.
- **Direct**: the same cell through ``Session.run`` of a session on the same image and
  work folder, in this process (no HTTP).
- **Create**: ``Sandbox.create()`` through the SDK (a hardened session container started
  and ready for cells) against ``session.start()`` directly. Median of ``--creates``.

Nothing is asserted; the figures and their ratios are printed. Needs the dev extra (the
SDK) and the images (`sandcrew images build`). Run from the repository root::

    python benchmarks/e2b_latency.py
    python benchmarks/e2b_latency.py --runs 50 --creates 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path

from sandcrew.sandbox import DockerSandbox, SandboxConfig

REPOSITORY = Path(__file__).resolve().parents[1]
KEY = "bench-" + "0123456789abcdef0123"


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="timed cells (default 30)")
    parser.add_argument("--creates", type=int, default=3, help="timed creates (default 3)")
    return parser.parse_args(argv)


def median_ms(call: Callable[[], object], runs: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        call()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


async def amedian_ms(call: Callable[[], Awaitable[object]], runs: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        await call()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        await call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


@contextmanager
def e2b_server() -> Iterator[str]:
    """`sandcrew e2b` on a free loopback port; its URL. Stopped with SIGTERM."""
    environment = {**os.environ, "SANDCREW_E2B__API_KEY": KEY}
    process = subprocess.Popen(
        [sys.executable, "-m", "sandcrew", "e2b", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=environment,
        cwd=REPOSITORY,
    )
    try:
        assert process.stdout is not None
        url = None
        for line in process.stdout:
            if "E2B_API_URL=" in line:
                url = line.split("E2B_API_URL=")[1].split()[0]
                break
        if url is None:
            raise SystemExit("sandcrew e2b did not start")
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        if process.stdout is not None:
            process.stdout.close()


def through_the_sdk(url: str, runs: int, creates: int) -> tuple[float, float, str]:
    os.environ.update(E2B_API_URL=url, E2B_SANDBOX_URL=url, E2B_API_KEY=KEY)
    from e2b_code_interpreter import Sandbox

    create_times = []
    for _ in range(creates):
        started = time.perf_counter()
        sandbox = Sandbox.create()
        create_times.append(time.perf_counter() - started)
        sandbox.kill()
    sandbox = Sandbox.create()
    try:
        shown = sandbox.run_code("import platform; platform.python_version()").text or "?"
        image = shown.strip("'")
        cell = median_ms(lambda: sandbox.run_code("print(1)"), runs)
    finally:
        sandbox.kill()
    return cell, statistics.median(create_times) * 1000, image


async def direct(image: str, runs: int, creates: int) -> tuple[float, float]:
    async with DockerSandbox(SandboxConfig(workdir="/home/user")) as sandbox:
        start_times = []
        for _ in range(creates):
            started = time.perf_counter()
            async with sandbox.session("python", image=image):
                start_times.append(time.perf_counter() - started)
        async with sandbox.session("python", image=image) as session:
            cell = await amedian_ms(lambda: session.run("print(1)"), runs)
    return cell, statistics.median(start_times) * 1000


def template_image() -> str:
    """The image the server serves the default template with (see docs/e2b.md)."""
    import docker

    from sandcrew.sandbox.images import list_images

    for status in list_images(docker.from_env()):
        if status.name == "python-data" and status.present:
            return status.tag
    return "sandcrew/python:latest"


def main(argv: list[str]) -> None:
    arguments = parse_arguments(argv)
    image = template_image()
    with e2b_server() as url:
        sdk_cell, sdk_create, python = through_the_sdk(url, arguments.runs, arguments.creates)
    direct_cell, direct_start = asyncio.run(direct(image, arguments.runs, arguments.creates))
    print(
        f"e2b {version('e2b')}, e2b-code-interpreter {version('e2b-code-interpreter')}; "
        f"image {image} (Python {python}); {os.cpu_count()} CPUs"
    )
    print(f"{'':34}{'through the SDK':>18}{'direct session':>18}{'ratio':>8}")
    print(
        f"{'cell round trip, print(1) (ms)':34}{sdk_cell:>18.1f}{direct_cell:>18.1f}"
        f"{sdk_cell / direct_cell:>7.2f}x"
    )
    print(
        f"{'create / start, ready (ms)':34}{sdk_create:>18.0f}{direct_start:>18.0f}"
        f"{sdk_create / direct_start:>7.2f}x"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
