"""The stdio server's reader of its client's lines: whole lines however they arrive, and a
stop that does not wait for the client."""

from __future__ import annotations

import array
import asyncio
import contextlib
import fcntl
import os
import subprocess
import sys
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandcrew.mcp._stdin import ClientLines

STANDARD_INPUT_MEANWHILE = """
import asyncio, os
from sandcrew.mcp._stdin import stdin_lines

def identity(file):
    status = os.stat(file)
    return status.st_dev, status.st_ino

async def main():
    before = identity(0)
    with stdin_lines() as lines:
        null_meanwhile = identity(0) == identity(os.devnull)
        others_read = os.read(0, 100)
        got = [line async for line in lines]
    print(before == identity(0), null_meanwhile, others_read, got)

asyncio.run(main())
"""


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    reading, writing = os.pipe()
    yield reading, writing
    for fd in (reading, writing):
        with contextlib.suppress(OSError):  # a test closed it already
            os.close(fd)


def unread(fd: int) -> int:
    """Bytes waiting in the pipe."""
    waiting = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, waiting)
    return waiting[0]


async def collect(lines: ClientLines) -> list[str]:
    return [line async for line in lines]


async def test_lines_come_whole_however_the_writes_cut_them(pipe: tuple[int, int]) -> None:
    reading, writing = pipe
    collecting = asyncio.ensure_future(collect(ClientLines(reading)))
    for piece in (b'{"a"', b": 1}\n{", b'"b": 2}\n\n', "é\n".encode()[:1]):
        os.write(writing, piece)
        # Each piece read on its own before the next is written (a kernel count: no event).
        while unread(reading):  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    os.write(writing, "é\n".encode()[1:] + b"last, without a newline")
    os.close(writing)

    assert await asyncio.wait_for(collecting, 10) == [
        '{"a": 1}\n',
        '{"b": 2}\n',
        "\n",
        "é\n",
        "last, without a newline",
    ]


async def test_invalid_utf8_is_replaced_as_the_sdk_reader_does(pipe: tuple[int, int]) -> None:
    reading, writing = pipe
    os.write(writing, b"ok \xff\xfe\n")
    os.close(writing)

    assert await collect(ClientLines(reading)) == ["ok \ufffd\ufffd\n"]


async def test_a_long_line_comes_whole(pipe: tuple[int, int]) -> None:
    reading, writing = pipe
    line = b"x" * (1 << 20) + b"\n"
    collecting = asyncio.ensure_future(collect(ClientLines(reading)))
    await asyncio.to_thread(os.write, writing, line)  # more than a pipe holds: read as it comes
    os.close(writing)

    assert await asyncio.wait_for(collecting, 10) == [line.decode()]


async def test_cancelling_a_read_ends_it_at_once_while_the_client_writes_nothing(
    pipe: tuple[int, int],
) -> None:
    reading, writing = pipe
    os.write(writing, b"first\n")
    seen: list[str] = []
    first_seen = asyncio.Event()

    async def read_all() -> None:
        async for line in ClientLines(reading):
            seen.append(line)
            first_seen.set()

    reader = asyncio.ensure_future(read_all())
    await asyncio.wait_for(first_seen.wait(), 10)
    reader.cancel()
    done, _ = await asyncio.wait({reader}, timeout=5)

    assert done == {reader}  # the write end is still open: a blocking read would hang here
    assert reader.cancelled()
    assert seen == ["first\n"]
    # The loop no longer watches the descriptor (it would wake at every turn while data
    # waits), and a later reader of it starts afresh.
    assert not asyncio.get_running_loop().remove_reader(reading)
    os.write(writing, b"second\n")
    os.close(writing)
    assert await collect(ClientLines(reading)) == ["second\n"]


async def test_a_regular_file_is_read_to_its_end(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(b'{"id": 1}\n{"id": 2}\n')
    fd = os.open(requests, os.O_RDONLY)
    try:
        assert await collect(ClientLines(fd)) == ['{"id": 1}\n', '{"id": 2}\n']
    finally:
        os.close(fd)


def test_standard_input_reads_as_empty_to_others_meanwhile_and_is_given_back() -> None:
    # In a process of its own: a test worker's own standard input is its channel to pytest.
    completed = subprocess.run(
        [sys.executable, "-c", STANDARD_INPUT_MEANWHILE],
        input=b"one\ntwo\n",
        capture_output=True,
        timeout=60,
        check=True,
    )

    assert completed.stdout == b"True True b'' ['one\\n', 'two\\n']\n", completed.stderr
