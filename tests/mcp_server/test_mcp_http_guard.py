"""`sandcrew mcp` over HTTP: the bearer token, bounded queues, runs cancelled with their client.

A real server process, the MCP SDK's own HTTP client, real containers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from sandcrew._http_serving import REQUEST_HEAD_SECONDS
from tests.mcp_server.helpers import http_mcp_server
from tests.process import run_cli
from tests.sandbox.helpers import our_containers, python_process, shared_client
from tests.slow_clients import closed_by_the_server, open_connection, trickle

pytestmark = pytest.mark.docker

TOKEN = "test-token-0123456789abcdef"
SLEEPER = "import time\nprint('started', flush=True)\ntime.sleep(60)\n"


@contextlib.asynccontextmanager
async def http_session(url: str, *, token: str | None = TOKEN) -> AsyncIterator[ClientSession]:
    """A session with the SDK's client; it leaves without telling the server (no DELETE)."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http, terminate_on_close=False) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def wait_for_containers(pid: int, count: int, *, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while len(our_containers(shared_client(), owner_pid=pid)) < count:
        assert time.monotonic() < deadline, f"fewer than {count} runs started"
        await asyncio.sleep(0.2)


async def test_a_connection_without_a_whole_request_is_closed() -> None:
    with http_mcp_server(env={"SANDCREW_MCP_AUTH_TOKEN": TOKEN}) as (url, _):
        silent, trickling = open_connection(url), open_connection(url)
        try:
            trickle(trickling)
            # Off the event loop: the checks block for up to the deadline.
            within = REQUEST_HEAD_SECONDS + 10
            for connection in (silent, trickling):
                assert await asyncio.to_thread(closed_by_the_server, connection, within=within)
        finally:
            silent.close()
            trickling.close()
        async with http_session(url) as session:
            result = await session.call_tool("run_code", {"code": "print(6 * 7)"})
    assert isinstance(result.structured_content, dict)
    assert result.structured_content["stdout"] == "42\n"


async def test_http_wants_the_bearer_token() -> None:
    with http_mcp_server(env={"SANDCREW_MCP_AUTH_TOKEN": TOKEN}) as (url, _):
        async with httpx2.AsyncClient() as raw:
            initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
            missing = await raw.post(url, json=initialize)
            wrong = await raw.post(
                url, json=initialize, headers={"Authorization": f"Bearer {TOKEN[:-1]}x"}
            )
        # The SDK's client cannot even initialize (it reports a generic error response).
        with pytest.raises(Exception):  # noqa: PT011, B017
            async with http_session(url, token=None):
                pass
        async with http_session(url) as session:
            result = await session.call_tool("run_code", {"code": "print(6 * 7)"})

    assert missing.status_code == wrong.status_code == 401
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert "Authorization: Bearer" in missing.json()["error"]
    assert isinstance(result.structured_content, dict)
    assert result.structured_content["stdout"] == "42\n"


async def test_a_request_body_past_the_bound_is_refused_unread() -> None:
    # The bound: twice the largest program and input files, and a mebibyte: 5 MiB here.
    caps = {
        "SANDCREW_SANDBOX__MAX_CODE_BYTES": "1048576",
        "SANDCREW_SANDBOX__MAX_INPUT_BYTES": "1048576",
    }
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(6):  # no Content-Length: the bound counts what is read
            yield b" " * (1 << 20)

    with http_mcp_server(env={"SANDCREW_MCP_AUTH_TOKEN": TOKEN, **caps}) as (url, _):
        async with httpx2.AsyncClient(timeout=60) as raw:
            declared = await raw.post(url, content=b" " * (6 << 20), headers=headers)
            chunked = await raw.post(url, content=chunks(), headers=headers)
        # The server goes on serving, a program of the largest size included.
        async with http_session(url) as session:
            largest = "print(len('" + "x" * ((1 << 20) - 40) + "'))"
            result = await session.call_tool("run_code", {"code": largest})

    for refused in (declared, chunked):
        assert refused.status_code == 413, refused.text
        assert "request body larger than the server accepts (5242880 bytes)" in refused.text
    assert isinstance(result.structured_content, dict)
    assert result.structured_content["exit_code"] == 0, result.structured_content


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--host", "0.0.0.0"), "listening on 0.0.0.0 needs a bearer token"),
        (("--host", "::"), "listening on :: needs a bearer token"),
        (("--auth-token", "short"), "at least 16 printable ASCII characters"),
    ],
    ids=["any-ipv4", "any-ipv6", "short-token"],
)
def test_a_server_beyond_loopback_without_a_token_does_not_start(
    args: tuple[str, ...], message: str
) -> None:
    completed = run_cli("mcp", "--transport", "streamable-http", *args, timeout=60)

    assert completed.returncode == 2, completed.stderr
    assert message in completed.stderr


# A client in a process of its own that queues ten runs and waits: killed, it can send
# no cancellation, its connections just close.
_CLIENT_THAT_IS_KILLED = """
import asyncio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

async def main():
    async with (
        create_mcp_http_client(headers={{"Authorization": "Bearer {token}"}}) as http,
        streamable_http_client({url!r}, http_client=http, terminate_on_close=False) as streams,
        ClientSession(*streams[:2]) as session,
    ):
        await session.initialize()
        await asyncio.gather(
            *(session.call_tool("run_code", {{"code": {code!r}}}) for _ in range(10))
        )

asyncio.run(main())
"""


async def test_runs_are_cancelled_and_removed_when_the_client_goes_away() -> None:
    with http_mcp_server(
        "--timeout", "60", "--max-queued-per-client", "20", env={"SANDCREW_MCP_AUTH_TOKEN": TOKEN}
    ) as (url, server):
        client_program = _CLIENT_THAT_IS_KILLED.format(token=TOKEN, url=url, code=SLEEPER)
        with python_process(client_program) as client:
            await wait_for_containers(server.pid, 1)
            await asyncio.sleep(1.5)
            client.kill()
            client.wait()
        # The client and its connections are gone; the server goes on serving.
        deadline = time.monotonic() + 30
        while our_containers(shared_client(), owner_pid=server.pid):
            assert time.monotonic() < deadline, "runs kept going after their client left"
            await asyncio.sleep(0.2)
        await asyncio.sleep(3)
        assert our_containers(shared_client(), owner_pid=server.pid) == []  # none queued starts
        assert server.poll() is None
        async with http_session(url) as session:
            again = await session.call_tool("run_code", {"code": "print('still here')"})

    assert isinstance(again.structured_content, dict)
    assert again.structured_content["stdout"] == "still here\n"


async def test_calls_past_the_queue_bounds_are_clear_tool_errors() -> None:
    with http_mcp_server(
        *("--timeout", "60", "--max-queued-per-client", "2", "--max-queued", "3"),
        env={"SANDCREW_MCP_AUTH_TOKEN": TOKEN},
    ) as (url, server):
        async with http_session(url) as first, http_session(url) as second:
            held = [
                asyncio.ensure_future(first.call_tool("run_code", {"code": SLEEPER}))
                for _ in range(2)
            ]
            await wait_for_containers(server.pid, 2)
            over_client = await first.call_tool("run_code", {"code": "print(1)"})
            held.append(asyncio.ensure_future(second.call_tool("run_code", {"code": SLEEPER})))
            await wait_for_containers(server.pid, 3)
            over_total = await second.call_tool("run_code", {"code": "print(1)"})
            for call in held:
                call.cancel()
            await asyncio.gather(*held, return_exceptions=True)

    assert over_client.is_error
    assert "this client already has 2 calls running or waiting" in over_client.content[0].text
    assert over_total.is_error
    assert "the server already holds 3 calls running or waiting" in over_total.content[0].text
