"""`sandcrew mcp` over streamable HTTP, and its `solve` tool with a scripted model."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from sandcrew.agents import StopReason
from sandcrew.crew import CrewResult
from sandcrew.testing import ScriptedModelServer
from tests.crew.conftest import FIBONACCI_ANSWER, FIBONACCI_TASK, happy_path_turns
from tests.mcp_server.helpers import http_mcp_server, mcp_session
from tests.process import run_cli
from tests.programs import FIBONACCI_PROGRAM
from tests.sandbox.helpers import our_containers, shared_client, wait_until_gone

pytestmark = pytest.mark.docker


@pytest.fixture
def http_server() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    with http_mcp_server("--timeout", "5") as started:
        yield started


async def test_streamable_http_serves_the_same_tools(
    http_server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, server = http_server
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        names = [tool.name for tool in (await session.list_tools()).tools]
        result = await session.call_tool("run_code", {"code": FIBONACCI_PROGRAM})

    assert names[:2] == ["run_code", "list_languages"]
    assert isinstance(result.structured_content, dict)
    assert result.structured_content["stdout"] == "63245986\n"

    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=30) == 130  # as every command stopped by SIGTERM or Ctrl-C
    assert wait_until_gone(server.pid) == []


async def test_solve_is_offered_only_with_a_model_and_reports_progress() -> None:
    without_model = {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""}
    async with mcp_session(env=without_model) as session:
        offered = [tool.name for tool in (await session.list_tools()).tools]
    assert "solve" not in offered

    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    with ScriptedModelServer(happy_path_turns()) as model:
        async with mcp_session("--base-url", model.base_url, "--model", "scripted") as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            result = await session.call_tool(
                "solve", {"task": FIBONACCI_TASK}, progress_callback=on_progress
            )

    assert tools["solve"].input_schema["required"] == ["task"]
    assert isinstance(result.structured_content, dict)
    # The tool returns the outcome `solve --json` prints, and its schema says so.
    outcome = CrewResult.model_validate(result.structured_content)
    assert outcome.model_dump(mode="json") == result.structured_content
    schema = CrewResult.model_json_schema(mode="serialization")
    assert tools["solve"].output_schema is not None
    assert tools["solve"].output_schema["properties"].keys() == schema["properties"].keys()
    assert outcome.solved is True
    assert outcome.answer is not None
    assert FIBONACCI_ANSWER in outcome.answer
    assert outcome.stop_reason is StopReason.TERMINATED
    [run] = outcome.runs
    assert run.stdout.strip() == FIBONACCI_ANSWER
    speakers = [line.split(":", 1)[0] for line in progress]
    assert speakers == ["admin", "coder", "reviewer", "runner", "admin"]


def test_the_http_server_says_where_it_listens_and_stops_cleanly_on_sigterm() -> None:
    # The helper checks that its first line says where it listens (`--port 0`).
    with http_mcp_server("--timeout", "60") as (url, server):

        async def stopped_mid_run() -> CallToolResult:
            async with (
                streamable_http_client(url) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                call = asyncio.ensure_future(
                    session.call_tool("run_code", {"code": "import time\ntime.sleep(60)"})
                )
                deadline = time.monotonic() + 60
                while not our_containers(shared_client(), owner_pid=server.pid):
                    assert time.monotonic() < deadline, "the run never started"
                    await asyncio.sleep(0.2)
                server.send_signal(signal.SIGTERM)
                return await asyncio.wait_for(call, 60)

        result = asyncio.run(stopped_mid_run())
        exit_code = server.wait(60)
        rest = server.stderr.read().decode()  # type: ignore[union-attr]
        # Removed by the server before it exited, not later by another process's reaper.
        left = our_containers(shared_client(), owner_pid=server.pid)

    # The run in flight is answered (as the client's model reads errors), its container gone.
    assert result.is_error is True
    assert result.content[0].text == "run_code cancelled: the server is stopping"  # type: ignore[union-attr]
    assert exit_code == 130
    # No uvicorn traceback: one line says what was stopped and cleaned up.
    assert rest == (
        "Interrupted: the server stopped; its calls in flight were cancelled "
        "and their containers removed.\n"
    )
    assert left == []


def test_mcp_help_shows_the_real_defaults() -> None:
    completed = run_cli("mcp", "--help", env={"COLUMNS": "200"})

    assert completed.returncode == 0, completed.stderr
    assert "the server's" not in completed.stdout
    one_line = " ".join(completed.stdout.split())
    default = r"(--[\w-]+) <[^>]+> (?:(?! --)[^\[])*\[default: \(([^)]*)\)"
    shown = dict(re.findall(default, one_line))
    assert {name: shown[name] for name in (
        "--max-sessions", "--session-idle-timeout", "--session-lifetime",
        "--max-queued-per-client", "--max-queued",
    )} == {
        "--max-sessions": "4", "--session-idle-timeout": "600", "--session-lifetime": "3600",
        "--max-queued-per-client": "8", "--max-queued": "32",
    }  # fmt: skip
