"""`sandcrew mcp --allow-host/--secret-header`: the server's hosts are a ceiling its clients
narrow, never widen, and its secrets reach their hosts only. The hosts are servers this test
starts on loopback, named `localhost` (the entry that allows it); nothing leaves the
machine."""

from __future__ import annotations

import json

import pytest
from mcp import ClientSession

from tests.egress_servers import statuses_of, upstream_server
from tests.mcp_server.helpers import mcp_session

pytestmark = pytest.mark.docker


async def call(session: ClientSession, tool: str, arguments: dict[str, object]) -> object:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def refusal(session: ClientSession, tool: str, arguments: dict[str, object]) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result
    [content] = result.content
    assert content.type == "text"
    return content.text


async def test_clients_choose_among_the_servers_hosts_and_get_no_more() -> None:
    with upstream_server("localhost") as first, upstream_server("localhost") as second:
        one, two = f"localhost:{first.port}", f"localhost:{second.port}"
        urls = [f"http://localhost:{first.port}/hello", f"http://localhost:{second.port}/hello"]
        code = statuses_of(urls)
        async with mcp_session(
            "--allow-host", one, "--allow-host", two, "--allow-network"
        ) as session:  # fmt: skip
            languages = await call(session, "list_languages", {})
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            narrowed = await call(session, "run_code", {"code": code, "allow_hosts": [one]})
            offline = await call(session, "run_code", {"code": code})
            widened = await refusal(
                session, "run_code", {"code": code, "allow_hosts": ["localhost:1"]}
            )
            both = await refusal(
                session, "run_code", {"code": code, "allow_hosts": [one], "network": True}
            )
            created = await call(session, "session_create", {"allow_hosts": [two]})
            assert isinstance(created, dict)
            cell = await call(
                session, "session_run", {"session_id": created["session_id"], "code": code}
            )
            await call(session, "session_close", {"session_id": created["session_id"]})

    assert isinstance(languages, dict)
    assert languages["allowed_hosts"] == [one, two]
    # The schema offers exactly the server's hosts.
    schema = tools["run_code"].input_schema["properties"]["allow_hosts"]
    assert schema["anyOf"][0]["items"]["enum"] == [one, two]

    assert isinstance(narrowed, dict)
    assert json.loads(str(narrowed["stdout"])) == [200, 403]  # the other host: the proxy's 403
    assert [event["host"] for event in narrowed["network"]["events"]] == ["localhost"] * 2
    assert [event["decision"] for event in narrowed["network"]["events"]] == ["allowed", "denied"]
    assert isinstance(offline, dict)
    assert "200" not in str(offline["stdout"])
    assert offline["network"] is None
    assert f"'localhost:1' is not one of ['{one}', '{two}']" in widened
    assert "exclude each other" in both
    assert isinstance(cell, dict)
    assert json.loads(str(cell["stdout"])) == [403, 200]
    assert len(first.requests) == 1
    assert len(second.requests) == 1


async def test_a_secret_header_of_the_server_reaches_its_host_and_never_the_client() -> None:
    key = "mcp-secret-3e9a7c51d2b04f68"
    with upstream_server("localhost") as local:
        entry = f"localhost:{local.port}"
        fetch = (
            "import urllib.request\n"
            f"request = urllib.request.Request('http://{entry}/echo')\n"
            "print(urllib.request.urlopen(request).read().decode(), end='')\n"
        )
        async with mcp_session(
            "--secret-header",
            f"http://{entry}=Authorization: Bearer {{env:MCP_TEST_KEY}}",
            env={"MCP_TEST_KEY": key},
        ) as session:
            languages = await call(session, "list_languages", {})
            result = await session.call_tool("run_code", {"code": fetch, "allow_hosts": [entry]})
    assert not result.is_error, result.content
    assert isinstance(languages, dict)
    assert languages["allowed_hosts"] == [entry]
    assert local.header_values("Authorization") == [f"Bearer {key}"]
    answer = result.structured_content
    assert isinstance(answer, dict)
    assert answer["stdout"] == "you sent: " + "*" * len(f"Bearer {key}") + "\n"
    [event] = answer["network"]["events"]
    assert event["injected"] == ["Authorization"]
    assert key not in json.dumps(answer) + json.dumps(
        [part.model_dump() for part in result.content]
    )
