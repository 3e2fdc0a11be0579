"""run_code reports the program's output as progress while it runs; the result is unchanged."""

from __future__ import annotations

import asyncio
import os

import pytest

from tests.mcp_server.helpers import mcp_session, sandcrew_mcp_children
from tests.sandbox.helpers import WAITS_FOR_RELEASE, release_program, shared_client, wait_until_gone

pytestmark = pytest.mark.docker


async def test_output_arrives_as_progress_while_the_program_runs() -> None:
    messages: list[str] = []
    released = asyncio.Event()

    async with mcp_session("--timeout", "60") as session:
        (server,) = sandcrew_mcp_children(os.getpid())

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            messages.append(message or "")
            printed = "".join(m.removeprefix("stdout: ") for m in messages)
            if printed.endswith("waiting\n") and not released.is_set():
                # The program waits for this: the line came while it was running.
                await asyncio.to_thread(release_program, shared_client(), owner_pid=server)
                released.set()

        result = await session.call_tool(
            "run_code",
            {"code": WAITS_FOR_RELEASE + "import sys\nsys.stderr.write('done\\n')\n"},
            progress_callback=on_progress,
        )

    assert wait_until_gone(server) == []
    assert released.is_set(), (messages, result)
    assert result.structured_content is not None
    assert result.structured_content["exit_code"] == 0
    assert result.structured_content["timed_out"] is False
    assert result.structured_content["stdout"] == "waiting\nreleased\n"
    streams = {message.split(": ", 1)[0] for message in messages}
    assert streams == {"stdout", "stderr"}
    text = {
        stream: "".join(m.split(": ", 1)[1] for m in messages if m.startswith(stream + ": "))
        for stream in streams
    }
    assert text == {"stdout": "waiting\nreleased\n", "stderr": "done\n"}


async def test_a_flood_sends_no_more_than_the_capped_output() -> None:
    flood = "import os\nfor _ in range(400):\n    os.write(1, b'x' * 65536)\n"
    messages: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async with mcp_session() as session:
        result = await session.call_tool("run_code", {"code": flood}, progress_callback=on_progress)

    assert result.structured_content is not None
    assert result.structured_content["stdout_truncated"] is True
    streamed = "".join(message.removeprefix("stdout: ") for message in messages)
    assert streamed == result.structured_content["stdout"] == "x" * (1024 * 1024)
