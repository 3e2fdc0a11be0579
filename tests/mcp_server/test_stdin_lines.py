"""The stdio server's reader of its client's lines: whole lines however they arrive, and a
stop that does not wait for the client."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandcrew.mcp._stdin import ClientLines


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    reading, writing = os.pipe()
    yield reading, writing
    for fd in (reading, writing):
        with contextlib.suppress(OSError):  # a test closed it already
            os.close(fd)


async def collect(lines: ClientLines) -> list[str]:
    return [line async for line in lines]


async def test_lines_come_whole_however_the_writes_cut_them(pipe: tuple[int, int]) -> None:
    reading, writing = pipe
    collecting = asyncio.ensure_future(collect(ClientLines(reading)))
    for piece in (b'{"a"', b": 1}\n{", b'"b": 2}\n\n', "é\n".encode()[:1]):
        os.write(writing, piece)
        await asyncio.sleep(0.05)  # each piece read on its own
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
    # The loop no longer watches the descriptor: a later reader of it starts afresh.
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
