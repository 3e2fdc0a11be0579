"""Live output: a program's output reaches the caller while it runs, and the result is unchanged.

Liveness is shown without timing: the program prints, then waits until the test lets
it end (:func:`release_program`), which the test does only once the first line has
arrived. Without live output the program would never be released and would time out.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Sequence

import docker
import pytest

from sandcrew.sandbox import DockerSandbox, ExecutionResult, OutputEvent, SandboxConfig
from sandcrew.sandbox._live import LiveOutput
from sandcrew.sandbox._streams import CappedBuffer, TrailedStream
from tests.sandbox.helpers import WAITS_FOR_RELEASE, our_containers, release_program

MARK = b"\x1e0123abcd:"
WAIT_LIMIT = 60.0
"""The released program's run limit: reached only when output is not live."""


def joined(events: Sequence[OutputEvent | ExecutionResult], stream: str) -> str:
    return "".join(
        event.text for event in events if isinstance(event, OutputEvent) and event.stream == stream
    )


def test_output_is_passed_on_at_once_unless_it_could_start_the_trailer() -> None:
    told: list[bytes] = []
    stream = TrailedStream(CappedBuffer(1 << 20, on_kept=told.append), MARK)

    stream.feed(b"progress 1\n")
    assert told == [b"progress 1\n"]  # not held back to wait for more

    stream.feed(b"50%\x1e01")  # could be the start of the trailer: held back
    assert told[1:] == [b"50%"]
    stream.feed(b"x\n")  # it was not
    assert told[2:] == [b"\x1e01x\n"]

    stream.feed(b"\x1e0123abcd:0\n")  # the real trailer is never output
    assert stream.status == 0
    assert b"".join(told) == b"progress 1\n50%\x1e01x\n"


def test_output_past_the_cap_is_not_passed_on() -> None:
    told: list[bytes] = []
    buffer = CappedBuffer(10, on_kept=told.append)
    buffer.feed(b"12345678")
    buffer.feed(b"abcdef")
    buffer.feed(b"more")
    assert told == [b"12345678", b"ab"]
    assert buffer.truncated


async def test_a_character_split_between_reads_arrives_whole() -> None:
    chunks: list[OutputEvent] = []
    live = LiveOutput(chunks.append, asyncio.get_running_loop())
    euro = "€".encode()

    def reading_thread() -> None:
        live.receive("stdout", b"price " + euro[:1])
        live.receive("stderr", b"warn\xff")
        live.receive("stdout", euro[1:] + b"5\n")

    await live.around(asyncio.to_thread(reading_thread))

    assert joined(chunks, "stdout") == "price €5\n"
    assert joined(chunks, "stderr") == "warn\ufffd"
    assert all(chunk.text for chunk in chunks)


async def test_a_failing_callback_cancels_the_work_and_raises() -> None:
    stopped = threading.Event()

    def fail(chunk: OutputEvent) -> None:
        raise RuntimeError(f"cannot show {chunk.text!r}")

    live = LiveOutput(fail, asyncio.get_running_loop())

    async def work() -> None:
        live.receive("stdout", b"hello")
        try:
            await asyncio.sleep(3600)
        finally:
            stopped.set()

    with pytest.raises(RuntimeError, match="cannot show 'hello'"):
        await asyncio.wait_for(live.around(work()), WAIT_LIMIT)
    assert stopped.is_set()


@pytest.mark.docker
async def test_the_first_line_arrives_while_the_program_still_runs(
    docker_client: docker.DockerClient,
) -> None:
    events: list[OutputEvent | ExecutionResult] = []
    async with DockerSandbox(docker_client=docker_client) as sandbox:
        async for event in sandbox.stream(WAITS_FOR_RELEASE, timeout=WAIT_LIMIT):
            events.append(event)
            if joined(events, "stdout") == "waiting\n" and isinstance(event, OutputEvent):
                await asyncio.to_thread(release_program, docker_client)

    result = events[-1]
    assert isinstance(result, ExecutionResult)
    assert not result.timed_out
    assert result.exit_code == 0
    chunks = [event for event in events if isinstance(event, OutputEvent)]
    assert len(chunks) == len(events) - 1  # the result comes last, once
    assert joined(chunks, "stdout") == result.stdout == "waiting\nreleased\n"


@pytest.mark.docker
def test_run_sync_calls_back_on_its_own_thread_while_the_program_runs(
    docker_client: docker.DockerClient,
) -> None:
    chunks: list[OutputEvent] = []
    threads: set[int] = set()

    def on_output(chunk: OutputEvent) -> None:
        threads.add(threading.get_ident())
        chunks.append(chunk)
        if chunk.text.endswith("\n") and joined(chunks, "stdout") == "waiting\n":
            release_program(docker_client)

    with DockerSandbox(docker_client=docker_client) as sandbox:
        result = sandbox.run_sync(WAITS_FOR_RELEASE, timeout=WAIT_LIMIT, on_output=on_output)

    assert not result.timed_out
    assert joined(chunks, "stdout") == result.stdout == "waiting\nreleased\n"
    assert threads == {threading.get_ident()}


# Forged trailers (wrong nonce, a bare mark start at the very end), escape codes,
# invalid UTF-8 and a NUL: all output, none of it a status.
HOSTILE = r"""
import sys
out = sys.stdout.buffer
out.write(b"\x1e" + b"f" * 32 + b":0\n")
out.write(b"\x1b]0;title\x07\x1b[2J\xff\xfe\x00 tail\n")
out.flush()
sys.stderr.buffer.write(b"\x1e" + b"0" * 32 + b":T0\n")
sys.stderr.flush()
out.write(b"\x1e")
out.flush()
sys.exit(3)
"""


@pytest.mark.docker
async def test_forged_trailers_and_escape_codes_are_output_like_any_other(
    docker_client: docker.DockerClient,
) -> None:
    chunks: list[OutputEvent] = []
    async with DockerSandbox(docker_client=docker_client) as sandbox:
        result = await sandbox.run(HOSTILE, on_output=chunks.append)

    assert result.exit_code == 3
    assert not result.timed_out
    assert joined(chunks, "stdout") == result.stdout
    assert joined(chunks, "stderr") == result.stderr
    assert result.stdout.startswith("\x1e" + "f" * 32 + ":0\n\x1b]0;title")
    assert result.stdout.endswith("\x00 tail\n\x1e")
    assert result.stderr == "\x1e" + "0" * 32 + ":T0\n"


FLOOD = """
import os, sys
block = b"x" * 65536
for _ in range(400):
    os.write(1, block)
    os.write(2, block)
"""


@pytest.mark.docker
async def test_a_flood_is_passed_on_only_up_to_the_output_cap(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(max_output_bytes=100_000)
    chunks: list[OutputEvent] = []
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        result = await sandbox.run(FLOOD, on_output=chunks.append)

    assert result.exit_code == 0
    assert result.stdout_truncated
    assert result.stderr_truncated
    assert joined(chunks, "stdout") == result.stdout == "x" * 100_000
    assert joined(chunks, "stderr") == result.stderr == "x" * 100_000


@pytest.mark.docker
async def test_leaving_the_stream_early_removes_the_container(
    docker_client: docker.DockerClient,
) -> None:
    seen: list[OutputEvent | ExecutionResult] = []
    async with DockerSandbox(docker_client=docker_client) as sandbox:
        async with contextlib.aclosing(
            sandbox.stream(WAITS_FOR_RELEASE, timeout=WAIT_LIMIT)
        ) as events:
            async for event in events:
                seen.append(event)
                break  # the program never ends on its own
        # Gone before the sandbox closes, not only by its closing.
        assert our_containers(docker_client) == []
    assert isinstance(seen[0], OutputEvent)


@pytest.mark.docker
async def test_a_failing_callback_ends_the_run(docker_client: docker.DockerClient) -> None:
    def refuse(chunk: OutputEvent) -> None:
        raise BrokenPipeError("the reader went away")

    async with DockerSandbox(docker_client=docker_client) as sandbox:
        with pytest.raises(BrokenPipeError):
            await sandbox.run(WAITS_FOR_RELEASE, timeout=WAIT_LIMIT, on_output=refuse)
