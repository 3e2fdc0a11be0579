"""`sandcrew mcp` over streamable HTTP, and its `solve` tool with a scripted model."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from sandcrew.agents import StopReason
from sandcrew.crew import CrewResult
from sandcrew.testing import ScriptedModelServer
from tests.crew.conftest import FIBONACCI_ANSWER, FIBONACCI_TASK, happy_path_turns
from tests.mcp_server.helpers import http_mcp_server, mcp_session, wait_until_gone
from tests.programs import FIBONACCI_PROGRAM

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
    assert server.wait(timeout=30) == 0
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
