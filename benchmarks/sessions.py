"""Sessions: a cell's round trip against ``docker exec``, start-up, 20 at once, idle memory.

- **Cell round trip**: ``print(1)`` as a cell of a started Python session, against the
  floor, ``docker exec`` of ``python3 -c 'print(1)'`` into a running container of the same
  image (``exec true``, a process that does nothing, is shown too). Median of ``--runs``.
- **Ready**: from ``sandbox.session().start()`` to an interpreter that takes cells, cold,
  and ``SessionPool.take()`` with a started session waiting (a warm pool).
- **Concurrent**: ``--sessions`` sessions started at once, each running two cells
  (``x = i``, then ``print(x * 3)``); every cell's output is checked.
- **Idle memory**: what the engine counts for an idle session's container.
- **Peer**: llm-sandbox's ``InteractiveSandboxSession`` (an IPython runner in its
  container; each cell a command file copied in, then polled for with ``exec``), on the
  same image: its ready time and its ``print(1)`` round trip (needs the benchmark
  environment, ``.bench-venv``; left out when llm-sandbox is not installed).

Nothing is asserted. Run from the repository root::

    .bench-venv/bin/python benchmarks/sessions.py
    .bench-venv/bin/python benchmarks/sessions.py --runs 10 --sessions 5
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

from _bench import BlockingRun, make_console
from _contenders import _docker_client, ensure_alias_image, exec_into_running, machine_facts

from sandcrew.sandbox import DockerSandbox, SessionLimits, SessionPool

MIB = 1024 * 1024


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="timed cells (default 30)")
    parser.add_argument("--starts", type=int, default=3, help="timed cold starts (default 3)")
    parser.add_argument("--sessions", type=int, default=20, help="concurrent sessions (default 20)")
    return parser.parse_args(argv)


async def median_ms(call: Callable[[], Awaitable[None]], runs: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        await call()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        await call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


async def exec_floor(runs: int) -> tuple[float, float]:
    """Median ms of ``docker exec python3 -c 'print(1)'`` and of ``docker exec true``."""
    async with exec_into_running() as run:
        assert isinstance(run, BlockingRun)

        async def python() -> None:
            output = await asyncio.to_thread(run.call)
            if output.strip() != "1":
                raise RuntimeError(f"docker exec printed {output!r}")

        python_ms = await median_ms(python, runs)
    import docker

    client = docker.from_env()
    container = client.containers.run(
        "sandcrew/python:latest", ["sleep", "infinity"], detach=True, network_disabled=True
    )
    try:

        async def true() -> None:
            await asyncio.to_thread(container.exec_run, ["true"])

        true_ms = await median_ms(true, runs)
    finally:
        container.remove(force=True)
        client.close()
    return python_ms, true_ms


def llm_sandbox_interactive(runs: int, starts: int) -> tuple[float, float] | None:
    """Median ms of llm-sandbox's interactive session getting ready, and of its cell;
    ``None`` without llm-sandbox."""
    try:
        from llm_sandbox.interactive import InteractiveSandboxSession
    except ImportError:
        return None
    client = _docker_client()
    image = ensure_alias_image(client)

    def opened() -> InteractiveSandboxSession:
        session = InteractiveSandboxSession(image=image, client=client, skip_environment_setup=True)
        session.open()
        return session

    def cell(session: InteractiveSandboxSession, code: str) -> str:
        return str(session.run(code).stdout)

    try:
        readies = []
        for _ in range(starts):
            started = time.perf_counter()
            ready = opened()
            readies.append(time.perf_counter() - started)
            ready.close()  # not timed: its close waits in ``docker stop``
        session = opened()
        try:
            cell(session, "x = 41")
            if cell(session, "print(x + 1)") != "42\n":
                raise RuntimeError("llm-sandbox's session kept no state")
            times = []
            for _ in range(runs):
                started = time.perf_counter()
                output = cell(session, "print(1)")
                times.append(time.perf_counter() - started)
                if output != "1\n":
                    raise RuntimeError(f"llm-sandbox's cell printed {output!r}")
        finally:
            session.close()
        return statistics.median(readies) * 1000, statistics.median(times) * 1000
    finally:
        client.close()


async def main(argv: list[str]) -> None:
    arguments = parse_arguments(argv)
    console = make_console()
    console.print(machine_facts())
    limits = SessionLimits(max_sessions=max(32, arguments.sessions + 1), start_timeout=120)
    async with DockerSandbox() as sandbox:
        with console.status("docker exec floor"):
            exec_python_ms, exec_true_ms = await exec_floor(arguments.runs)

        with console.status("llm-sandbox's interactive session"):
            peer = await asyncio.to_thread(
                llm_sandbox_interactive, arguments.runs, arguments.starts
            )

        with console.status("cell round trip"):
            async with sandbox.session(limits=limits) as session:

                async def cell() -> None:
                    result = await session.run("print(1)")
                    if result.stdout != "1\n":
                        raise RuntimeError(f"the cell printed {result.stdout!r}")

                cell_ms = await median_ms(cell, arguments.runs)
                await asyncio.sleep(1)
                name = session.container_name
                stats = await asyncio.to_thread(sandbox.client.api.stats, name, stream=False)
                idle_bytes = stats["memory_stats"].get("usage", 0)

        with console.status("cold starts"):
            starts = []
            for _ in range(arguments.starts):
                started = time.perf_counter()
                opened = await sandbox.session(limits=limits).start()
                starts.append(time.perf_counter() - started)
                await opened.close()
            ready_ms = statistics.median(starts) * 1000

        with console.status("starts from a warm pool"):
            takes = []
            async with SessionPool(lambda: sandbox.session(limits=limits), size=1) as pool:
                for _ in range(arguments.starts):
                    while pool.waiting == 0:  # noqa: ASYNC110 - waits for the refill
                        await asyncio.sleep(0.1)
                    started = time.perf_counter()
                    taken = await pool.take()
                    takes.append(time.perf_counter() - started)
                    await taken.close()
            pooled_ms = statistics.median(takes) * 1000

        with console.status(f"{arguments.sessions} sessions at once"):
            started = time.perf_counter()
            sessions = await asyncio.gather(
                *(sandbox.session(limits=limits).start() for _ in range(arguments.sessions))
            )
            all_ready = time.perf_counter() - started
            try:
                await asyncio.gather(
                    *(session.run(f"x = {index}") for index, session in enumerate(sessions))
                )
                results = await asyncio.gather(
                    *(session.run("print(x * 3)") for session in sessions)
                )
                all_done = time.perf_counter() - started
                right = sum(
                    result.stdout == f"{index * 3}\n" for index, result in enumerate(results)
                )
                usages = await asyncio.gather(
                    *(
                        asyncio.to_thread(
                            sandbox.client.api.stats, session.container_name, stream=False
                        )
                        for session in sessions
                    )
                )
            finally:
                await asyncio.gather(*(session.close() for session in sessions))
            total_bytes = sum(usage["memory_stats"].get("usage", 0) for usage in usages)

    console.print(f"cell round trip, print(1), median of {arguments.runs}: {cell_ms:.1f} ms")
    console.print(
        f"docker exec python3 -c 'print(1)' into a running container: {exec_python_ms:.1f} ms "
        f"(ratio {cell_ms / exec_python_ms:.2f}x, goal <= 1.2x)"
    )
    console.print(
        f"docker exec true into a running container: {exec_true_ms:.1f} ms "
        f"(ratio {cell_ms / exec_true_ms:.2f}x)"
    )
    if peer is None:
        console.print("llm-sandbox's interactive session: not measured (llm-sandbox not installed)")
    else:
        peer_ready_ms, peer_cell_ms = peer
        console.print(
            f"llm-sandbox InteractiveSandboxSession, same image: cell {peer_cell_ms:.1f} ms "
            f"(sandcrew's cell {cell_ms / peer_cell_ms:.3f}x of it), ready {peer_ready_ms:.0f} ms"
        )
    console.print(f"session ready, cold, median of {arguments.starts}: {ready_ms:.0f} ms")
    console.print(
        f"session ready from a warm pool, median of {arguments.starts}: {pooled_ms:.1f} ms "
        "(goal <= 150 ms)"
    )
    console.print(
        f"{arguments.sessions} sessions at once: all ready in {all_ready:.1f} s, both cells of "
        f"every session done in {all_done:.1f} s, {right}/{arguments.sessions} right"
    )
    console.print(
        f"idle session memory: {idle_bytes / MIB:.1f} MiB; {arguments.sessions} sessions after "
        f"two cells: {total_bytes / MIB:.0f} MiB ({total_bytes / MIB / arguments.sessions:.1f} "
        "MiB each)"
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
