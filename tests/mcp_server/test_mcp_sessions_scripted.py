"""The MCP session tools on the session test double, through the real MCP SDK's client and
server connected in memory (no Docker, no child process): results and files as clients
see them, the cap per client, ownership, sessions that end with their connection, and the
connectionless form of the protocol. The real containers are proven by
test_mcp_sessions.py."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp.client import Client

from sandcrew.core import UserError
from sandcrew.mcp import SandboxToolbox, ServerLimits, build_server, limits_of
from sandcrew.sandbox import CellError, DisplayOutput, SandboxConfig
from sandcrew.settings import AppSettings, McpSettings
from sandcrew.testing import ScriptedCell, ScriptedSandbox, ScriptedSession

MIB = 1024 * 1024
MAX_TIMEOUT = 20.0
PNG = b"\x89PNG\r\n\x1a\nscripted figure"
STATELESS = "2026-07-28"
"""The stateless form of the protocol: calls come on no connection of their own."""
SETTINGS = AppSettings(sandbox=SandboxConfig(timeout=MAX_TIMEOUT, memory_bytes=512 * MIB))


class Served:
    """A server on a scripted sandbox: its toolbox, and the MCP server over it."""

    def __init__(
        self, sandbox: ScriptedSandbox, toolbox: SandboxToolbox, limits: ServerLimits
    ) -> None:
        self.sandbox = sandbox
        self.toolbox = toolbox
        self.server = build_server(toolbox, limits, with_solve=False)

    def client(self, mode: str = "legacy") -> Client:
        """A client connected in memory: ``legacy`` holds a connection of its own."""
        return Client(self.server, mode=mode)


@contextlib.asynccontextmanager
async def served(*sessions: ScriptedSession, max_sessions: int = 4) -> AsyncIterator[Served]:
    sandbox = ScriptedSandbox({}, sessions=sessions)
    settings = SETTINGS.model_copy(update={"mcp": McpSettings(max_sessions=max_sessions)})
    limits = limits_of(settings, allow_network=False)
    async with SandboxToolbox(SETTINGS, limits, sandbox_factory=lambda config: sandbox) as box:
        yield Served(sandbox, box, limits)


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    """The text of a refused call (a tool error the client's model reads)."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result
    (content,) = result.content
    assert content.type == "text"
    return content.text


async def test_cells_files_and_close_as_a_client_sees_them() -> None:
    error = CellError(name="ZeroDivisionError", value="division by zero", traceback="Trace")
    session = ScriptedSession(
        [
            ScriptedCell(stdout="set\n"),
            ScriptedCell(
                outputs=(
                    DisplayOutput(kind="result", data={"text/plain": "42"}),
                    DisplayOutput(kind="display", data={"image/png": PNG}),
                )
            ),
            ScriptedCell(stdout="2\n", stderr="warn\n"),
            ScriptedCell(error=error),
        ]
    )
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with served(session) as server, server.client() as client:
        created = await call(client, "session_create", language="python")
        sid = created["session_id"]
        first = await call(client, "session_run", session_id=sid, code="x = 41\nprint('set')")
        second = await call(client, "session_run", session_id=sid, code="x + 1", timeout=5)
        await call(client, "session_put_file", session_id=sid, name="data/in.csv", text="a,b\n")
        await call(
            client,
            "session_put_file",
            session_id=sid,
            name="/workspace/blob.bin",
            data_base64=base64.b64encode(b"\x00\xff").decode(),
        )
        reading = await client.call_tool(
            "session_run", {"session_id": sid, "code": "read()"}, progress_callback=on_progress
        )
        text = await call(client, "session_get_file", session_id=sid, name="data/in.csv")
        binary = await call(client, "session_get_file", session_id=sid, name="blob.bin")
        listing = await call(client, "session_list_files", session_id=sid)
        raised = await call(client, "session_run", session_id=sid, code="1 / 0")
        listed = await call(client, "session_list")
        await call(client, "session_close", session_id=sid)
        after_close = await call(client, "session_list")
        message = await refused(client, "session_run", session_id=sid, code="x")

    assert (created["language"], created["cell_timeout"], created["cells"]) == ("python", 20, 0)
    assert (first["stdout"], first["execution_count"], first["exit_code"]) == ("set\n", 1, 0)
    assert second["outputs"] == [
        {"kind": "result", "data": {"text/plain": "42"}, "omitted": []},
        {"kind": "display", "data": {"image/png": base64.b64encode(PNG).decode()}, "omitted": []},
    ]
    assert reading.structured_content is not None
    assert (reading.structured_content["stdout"], reading.structured_content["stderr"]) == (
        "2\n",
        "warn\n",
    )
    assert progress == ["stdout: 2\n", "stderr: warn\n"]
    assert session.files == {"data/in.csv": b"a,b\n", "blob.bin": b"\x00\xff"}
    assert text == {"name": "data/in.csv", "size": 4, "text": "a,b\n", "data_base64": None}
    assert (binary["text"], base64.b64decode(binary["data_base64"])) == (None, b"\x00\xff")
    assert [(entry["name"], entry["kind"]) for entry in listing["entries"]] == [
        ("blob.bin", "file"),
        ("data", "folder"),
    ]
    assert (raised["exit_code"], raised["error"]["name"]) == (1, "ZeroDivisionError")
    assert [(info["session_id"], info["cells"]) for info in listed["sessions"]] == [(sid, 4)]
    assert after_close["sessions"] == []
    assert "no open session" in message
    assert session.closed
    # No limit asked: the server's ceiling; a lower one is the cell's.
    assert [cell.timeout for cell in session.ran] == [MAX_TIMEOUT, 5, MAX_TIMEOUT, MAX_TIMEOUT]
    session.assert_complete()


async def test_a_client_cannot_raise_the_cell_limit() -> None:
    session = ScriptedSession([])
    async with served(session) as server, server.client() as client:
        sid = (await call(client, "session_create"))["session_id"]
        message = await refused(
            client, "session_run", session_id=sid, code="x", timeout=MAX_TIMEOUT + 1
        )

    assert "timeout" in message
    assert session.ran == []


async def test_refused_file_requests_are_tool_errors_the_model_can_read() -> None:
    session = ScriptedSession()
    async with served(session) as server, server.client() as client:
        sid = (await call(client, "session_create"))["session_id"]
        missing = await refused(client, "session_get_file", session_id=sid, name="nope.txt")
        outside = await refused(
            client, "session_put_file", session_id=sid, name="/etc/passwd", text="root"
        )
        both = await refused(
            client, "session_put_file", session_id=sid, name="a", text="x", data_base64="eA=="
        )
        garbled = await refused(
            client, "session_put_file", session_id=sid, name="a", data_base64="not base64!"
        )

    assert missing == "session_get_file: get nope.txt: no such file"
    assert "outside the session's work folder" in outside
    assert "exactly one" in both
    assert "not valid base64" in garbled
    assert session.files == {}


async def test_the_cap_holds_per_client_and_a_session_belongs_to_its_client() -> None:
    mine, theirs, again = ScriptedSession(), ScriptedSession(), ScriptedSession()
    async with (
        served(mine, theirs, again, max_sessions=1) as server,
        server.client() as owner,
        server.client() as other,
    ):
        sid = (await call(owner, "session_create"))["session_id"]
        over_cap = await refused(owner, "session_create")
        other_sid = (await call(other, "session_create"))["session_id"]
        reaching = [
            await refused(other, "session_run", session_id=sid, code="print(secret)"),
            await refused(other, "session_get_file", session_id=sid, name="secret.txt"),
            await refused(other, "session_put_file", session_id=sid, name="x", text="x"),
            await refused(other, "session_list_files", session_id=sid),
            await refused(other, "session_close", session_id=sid),
        ]
        other_list = await call(other, "session_list")
        await call(owner, "session_close", session_id=sid)
        replaced = await call(owner, "session_create")

    assert "already holds 1 sessions" in over_cap
    assert all(f"no open session {sid!r}" in text for text in reaching)
    assert [info["session_id"] for info in other_list["sessions"]] == [other_sid]
    assert mine.ran == []
    assert mine.files == {}
    assert replaced["session_id"] not in (sid, other_sid)
    assert server.sandbox.sessions_opened == [mine, theirs, again]


async def test_a_client_s_sessions_end_with_its_connection_and_no_one_else_s() -> None:
    leaving, staying = ScriptedSession(), ScriptedSession()
    async with served(leaving, staying) as server, server.client() as stays:
        async with server.client() as leaves:
            await call(leaves, "session_create")
        await call(stays, "session_create")
        assert leaving.closed
        assert not staying.closed
        assert (await call(stays, "session_list"))["sessions"] != []
    assert staying.closed


async def test_a_session_that_ended_on_its_own_is_gone_for_its_client() -> None:
    session = ScriptedSession()
    async with served(session) as server, server.client() as client:
        sid = (await call(client, "session_create"))["session_id"]
        await session.close()  # as its idle limit or a lost container would end it
        listed = await call(client, "session_list")
        message = await refused(client, "session_run", session_id=sid, code="x")

    assert listed["sessions"] == []
    assert "it may have expired" in message


async def test_connectionless_calls_reach_a_session_by_id_and_may_not_list() -> None:
    session = ScriptedSession([ScriptedCell(stdout="41\n")])
    async with served(session, max_sessions=1) as server:
        async with server.client(STATELESS) as first:
            sid = (await call(first, "session_create"))["session_id"]
        async with server.client(STATELESS) as second:
            ran = await call(second, "session_run", session_id=sid, code="print(41)")
            over_cap = await refused(second, "session_create")
            listing = await refused(second, "session_list")
        still_open = not session.closed
        await server.toolbox.aclose()
        with pytest.raises(UserError, match="stopping"):
            await server.toolbox.session_create("python")

    assert ran["stdout"] == "41\n"
    assert "already holds 1 sessions" in over_cap
    assert "stateless form" in listing
    assert still_open, "a connectionless session ended with the request that made it"
    assert session.closed


async def test_stopping_the_server_closes_every_session() -> None:
    held = ScriptedSession()
    async with served(held) as server, server.client() as client:
        await call(client, "session_create")
        await server.toolbox.aclose()
        message = await refused(client, "session_create")

    assert held.closed
    assert server.sandbox.closed
    assert "stopping" in message


async def test_no_session_tools_when_the_server_allows_none() -> None:
    async with served(max_sessions=0) as server, server.client() as client:
        names = {tool.name for tool in (await client.list_tools()).tools}

    assert "run_code" in names
    assert not [name for name in names if name.startswith("session_")]
