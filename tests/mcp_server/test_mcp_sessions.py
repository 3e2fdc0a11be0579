"""The MCP session tools, driven by the `mcp` SDK's client: state kept between calls, files,
caps, and sessions that end with the client's connection (their containers removed)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import subprocess
import sys
import time
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.mcp_server.helpers import (
    http_mcp_server,
    mcp_session,
    sandcrew_mcp_children,
)
from tests.sandbox.helpers import (
    our_containers,
    process_alive,
    shared_client,
    wait_until_gone,
)

pytestmark = pytest.mark.docker


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def refused(session: ClientSession, tool: str, **arguments: Any) -> str:
    """The text of a refused call (a tool error the client's model reads)."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result
    (content,) = result.content
    assert content.type == "text"
    return content.text


def session_containers(server_pid: int) -> list[str]:
    return our_containers(shared_client(), owner_pid=server_pid)


def wait_for(condition: Any, *, within: float = 30.0) -> bool:
    """Poll ``condition`` until it holds or ``within`` seconds passed; whether it held."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


async def test_a_session_keeps_state_and_files_between_calls() -> None:
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with mcp_session() as session:
        (server,) = sandcrew_mcp_children(os.getpid())
        tools = {tool.name for tool in (await session.list_tools()).tools}
        created = await call(session, "session_create", language="python")
        sid = created["session_id"]
        first = await call(session, "session_run", session_id=sid, code="x = 41\nprint('set')")
        second = await call(session, "session_run", session_id=sid, code="x + 1")
        await call(
            session, "session_put_file", session_id=sid, name="data/in.csv", text="a,b\n1,2\n"
        )
        await call(
            session,
            "session_put_file",
            session_id=sid,
            name="blob.bin",
            data_base64=base64.b64encode(b"\x00\xff\x10").decode(),
        )
        reading = await session.call_tool(
            "session_run",
            {
                "session_id": sid,
                "code": "import pathlib\n"
                "rows = pathlib.Path('data/in.csv').read_text().splitlines()\n"
                "print(len(rows), flush=True)\n"
                "pathlib.Path('out.txt').write_text(rows[1].upper())\n"
                "print(pathlib.Path('blob.bin').read_bytes().hex())",
            },
            progress_callback=on_progress,
        )
        fetched = await call(session, "session_get_file", session_id=sid, name="out.txt")
        binary = await call(session, "session_get_file", session_id=sid, name="blob.bin")
        listing = await call(session, "session_list_files", session_id=sid)
        listed = await call(session, "session_list")
        raised = await call(session, "session_run", session_id=sid, code="1 / 0")
        await call(session, "session_close", session_id=sid)
        after_close = await call(session, "session_list")
        message = await refused(session, "session_run", session_id=sid, code="x")
        containers_after_close = session_containers(server)

    assert {"session_create", "session_run", "session_close", "session_list"} <= tools
    assert created["language"] == "python"
    assert first["stdout"] == "set\n"
    assert first["execution_count"] == 1
    assert second["outputs"] == [{"kind": "result", "data": {"text/plain": "42"}, "omitted": []}]
    assert reading.structured_content is not None
    assert reading.structured_content["stdout"] == "2\n00ff10\n"
    assert progress
    assert all(message.startswith("stdout: ") for message in progress)
    assert "".join(message.removeprefix("stdout: ") for message in progress) == "2\n00ff10\n"
    assert fetched == {"name": "out.txt", "size": 3, "text": "1,2", "data_base64": None}
    assert binary["text"] is None
    assert base64.b64decode(binary["data_base64"]) == b"\x00\xff\x10"
    assert {(entry["name"], entry["kind"]) for entry in listing["entries"]} >= {
        ("data", "folder"),
        ("out.txt", "file"),
        ("blob.bin", "file"),
    }
    assert [entry["session_id"] for entry in listed["sessions"]] == [sid]
    assert listed["sessions"][0]["cells"] == 3
    assert raised["error"]["name"] == "ZeroDivisionError"
    assert after_close["sessions"] == []
    assert "no open session" in message
    assert containers_after_close == []
    assert wait_until_gone(server) == []


async def test_the_cap_on_sessions_per_client_is_held() -> None:
    async with mcp_session("--max-sessions", "1") as session:
        first = await call(session, "session_create")
        message = await refused(session, "session_create")
        await call(session, "session_close", session_id=first["session_id"])
        again = await call(session, "session_create")
        ran = await call(session, "session_run", session_id=again["session_id"], code="print(7)")

    assert "already holds 1 sessions" in message
    assert ran["stdout"] == "7\n"


async def test_no_session_tools_when_the_server_allows_none() -> None:
    async with mcp_session("--max-sessions", "0") as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
    assert "run_code" in names
    assert not [name for name in names if name.startswith("session_")]


async def test_a_stdio_client_that_goes_away_leaves_no_session_behind() -> None:
    async with mcp_session() as session:
        (server,) = sandcrew_mcp_children(os.getpid())
        created = await call(session, "session_create")
        await call(session, "session_run", session_id=created["session_id"], code="x = 1")
        assert len(session_containers(server)) == 1
    assert wait_until_gone(server) == []


@pytest.mark.slow
async def test_an_idle_session_expires_and_its_container_goes() -> None:
    async with mcp_session("--session-idle-timeout", "20") as session:
        (server,) = sandcrew_mcp_children(os.getpid())
        created = await call(session, "session_create")
        assert len(session_containers(server)) == 1
        gone = await asyncio.to_thread(wait_for, lambda: not session_containers(server), within=120)
        listed = await call(session, "session_list")
        message = await refused(session, "session_run", session_id=created["session_id"], code="1")
    assert gone
    assert listed["sessions"] == []
    assert "may have expired" in message


async def test_large_display_outputs_are_left_out_not_sent() -> None:
    huge = (
        "from IPython.display import display\n"
        "display({'text/plain': 'x' * (2 * 1024 * 1024)}, raw=True)\n"
        "print('shown')"
    )
    async with mcp_session() as session:
        created = await call(session, "session_create")
        ran = await call(session, "session_run", session_id=created["session_id"], code=huge)
    assert ran["stdout"] == "shown\n"
    assert ran["outputs"] == [{"kind": "display", "data": {}, "omitted": ["text/plain"]}]


async def test_sessions_belong_to_their_connection_and_end_with_it() -> None:
    with http_mcp_server("--max-sessions", "2") as (url, server):
        await _owner_then_other(url, server)


async def _owner_then_other(url: str, server: subprocess.Popen[bytes]) -> None:
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as owner:
        await owner.initialize()
        created = await call(owner, "session_create")
        sid = created["session_id"]
        await call(owner, "session_run", session_id=sid, code="secret = 'owner only'")
        async with (
            streamable_http_client(url) as (other_read, other_write),
            ClientSession(other_read, other_write) as other,
        ):
            await other.initialize()
            theirs = await refused(other, "session_run", session_id=sid, code="print(secret)")
            other_list = await call(other, "session_list")
        assert len(session_containers(server.pid)) == 1
    # The owner disconnected; the server goes on, without the session's container.
    gone = await asyncio.to_thread(wait_for, lambda: not session_containers(server.pid))
    assert gone
    assert process_alive(server.pid)
    assert "no open session" in theirs
    assert other_list["sessions"] == []


async def test_a_flooding_cell_is_capped_in_its_result_and_its_progress() -> None:
    flood = "import sys\nfor _ in range(200):\n    sys.stdout.write('x' * 65536)\nprint('end')"
    messages: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async with mcp_session() as session:
        created = await call(session, "session_create")
        result = await session.call_tool(
            "session_run",
            {"session_id": created["session_id"], "code": flood},
            progress_callback=on_progress,
        )
        after = await call(session, "session_run", session_id=created["session_id"], code="7 * 6")

    assert result.structured_content is not None
    ran = result.structured_content
    assert ran["stdout_truncated"] is True
    assert len(ran["stdout"]) <= 1024 * 1024
    streamed = "".join(message.removeprefix("stdout: ") for message in messages)
    assert len(streamed) <= 1024 * 1024
    assert after["outputs"][0]["data"]["text/plain"] == "42"


async def test_the_stateless_form_of_the_protocol_gets_sessions_that_outlive_a_request() -> None:
    with http_mcp_server("--max-sessions", "1") as (url, server):
        async with Client(url, mode="2026-07-28") as client:
            created = await client.call_tool("session_create", {"language": "python"})
            assert not created.is_error, created.content
            assert isinstance(created.structured_content, dict)
            sid = created.structured_content["session_id"]
            held = len(session_containers(server.pid))
            first = await client.call_tool("session_run", {"session_id": sid, "code": "x = 41"})
            second = await client.call_tool("session_run", {"session_id": sid, "code": "x + 1"})
            over_cap = await client.call_tool("session_create", {"language": "python"})
            listed = await client.call_tool("session_list", {})
            closed = await client.call_tool("session_close", {"session_id": sid})
            gone = await asyncio.to_thread(wait_for, lambda: not session_containers(server.pid))

    assert held == 1
    assert not first.is_error
    assert isinstance(second.structured_content, dict)
    assert second.structured_content["outputs"][0]["data"] == {"text/plain": "42"}
    assert over_cap.is_error
    assert listed.is_error
    assert "stateless form" in str(listed.content)
    assert not closed.is_error
    assert gone


def test_a_killed_http_client_s_sessions_are_closed_after_the_client_idle_timeout() -> None:
    client_code = (
        "import asyncio, sys\n"
        "from mcp import ClientSession\n"
        "from mcp.client.streamable_http import streamable_http_client\n"
        "async def main():\n"
        "    async with streamable_http_client(sys.argv[1]) as (read, write), "
        "ClientSession(read, write) as session:\n"
        "        await session.initialize()\n"
        "        await session.call_tool('session_create', {'language': 'python'})\n"
        "        print('created', flush=True)\n"
        "        await asyncio.sleep(3600)\n"
        "asyncio.run(main())\n"
    )
    with http_mcp_server("--client-idle-timeout", "3") as (url, server):
        with subprocess.Popen(
            [sys.executable, "-c", client_code, url], stdout=subprocess.PIPE, text=True
        ) as client:
            assert client.stdout is not None
            assert client.stdout.readline() == "created\n"
            assert len(session_containers(server.pid)) == 1
            client.kill()  # no DELETE, no goodbye
        started = time.monotonic()
        gone = wait_for(lambda: not session_containers(server.pid), within=60)
        waited = time.monotonic() - started

    assert gone, "the vanished client's session container is still there after 60 s"
    assert waited >= 2, "closed before the client idle timeout"


async def test_a_session_hands_back_any_file_its_cells_wrote_and_names_a_bad_name_plainly() -> None:
    # A session has no program file and no out/ of a run's: main.py and out/ are a cell's own.
    async with mcp_session() as session:
        sid = (await call(session, "session_create"))["session_id"]
        await call(
            session,
            "session_run",
            session_id=sid,
            code="import os\nos.makedirs('out')\n"
            "open('out/table.csv', 'w').write('a,b\\n')\nopen('main.py', 'w').write('x = 1\\n')",
        )
        table = await call(session, "session_get_file", session_id=sid, name="out/table.csv")
        program = await call(session, "session_get_file", session_id=sid, name="main.py")
        listed = await call(session, "session_list_files", session_id=sid, path="out")
        await call(session, "session_put_file", session_id=sid, name="out/more.txt", text="+")
        more = await call(session, "session_get_file", session_id=sid, name="out/more.txt")
        refusal = await refused(session, "session_get_file", session_id=sid, name="../etc/passwd")

    assert table["text"] == "a,b\n"
    assert program["text"] == "x = 1\n"
    assert [entry["name"] for entry in listed["entries"]] == ["table.csv"]
    assert more["text"] == "+"
    assert "file name '../etc/passwd' is refused" in refusal
    assert "input file" not in refusal  # it is a file of the session, not an input of a run


async def test_the_server_s_total_of_sessions_is_its_own_cap_and_told_to_clients() -> None:
    # Each client may hold one; all of them together two: the third client is told what it
    # can do (close one of its own, or wait), not a setting it cannot reach.
    with http_mcp_server("--max-sessions", "1", "--max-sessions-total", "2") as (url, server):
        async with contextlib.AsyncExitStack() as stack:
            clients = []
            for _ in range(3):
                read, write = await stack.enter_async_context(streamable_http_client(url))
                client = await stack.enter_async_context(ClientSession(read, write))
                await client.initialize()
                clients.append(client)
            first = await call(clients[0], "session_create")
            second = await call(clients[1], "session_create")
            message = await refused(clients[2], "session_create")
            held = len(session_containers(server.pid))

    assert first["session_id"] != second["session_id"]
    assert held == 2
    assert "the server holds 2 sessions for all its clients" in message
    assert "close one of yours with session_close" in message
    assert "SessionLimits" not in message
