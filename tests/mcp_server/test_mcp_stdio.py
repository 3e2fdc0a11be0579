"""`sandcrew mcp` over stdio, driven by the MCP SDK's client: real process, real containers."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import LATEST_PROTOCOL_VERSION
from mcp_types import INVALID_PARAMS

from tests.mcp_server.helpers import (
    mcp_session,
    sandcrew_mcp_children,
    server_parameters,
)
from tests.process import run_cli
from tests.programs import FIBONACCI_PROGRAM
from tests.programs_files import CSV, CSV_SUMMARY, CSV_TO_PNG_PROGRAM, png_size
from tests.sandbox.helpers import our_containers, shared_client, wait_until_gone

pytestmark = pytest.mark.docker

SLEEPER = "import time\nprint('started', flush=True)\ntime.sleep(60)\n"
MEMORY_HOG = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))\n"


async def run_code(session: ClientSession, **arguments: object) -> dict[str, object]:
    result = await session.call_tool("run_code", arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def test_tools_are_listed_with_schemas_that_carry_the_limits() -> None:
    async with mcp_session("--timeout", "5", "--memory", "128m") as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}

    # solve comes with a configured model (test_mcp_http_and_solve); these two always.
    assert {"run_code", "list_languages"} <= set(tools)
    run = tools["run_code"]
    schema = run.input_schema
    assert schema["required"] == ["code"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["code"]["type"] == "string"
    assert schema["properties"]["language"]["default"] == "python"
    timeout = schema["properties"]["timeout"]["anyOf"][0]
    assert timeout == {"type": "number", "maximum": 5.0, "exclusiveMinimum": 0}
    memory = schema["properties"]["memory_mb"]["anyOf"][0]
    assert memory["maximum"] == 128
    assert schema["properties"]["network"]["enum"] == [False]
    assert run.description is not None
    assert "throwaway container" in run.description
    assert run.output_schema is not None
    assert {"exit_code", "stdout", "stderr", "timed_out", "oom_killed"} <= set(
        run.output_schema["properties"]
    )
    assert tools["list_languages"].input_schema["properties"] == {}


async def test_list_languages_names_the_languages_and_limits() -> None:
    async with mcp_session("--timeout", "7") as session:
        result = await session.call_tool("list_languages", {})

    assert result.structured_content == {
        "languages": ["python", "bash", "javascript"],
        "default_language": "python",
        "max_timeout": 7.0,
        "max_memory_mb": 256,
        "network_allowed": False,
        "allowed_hosts": [],
    }


async def test_fibonacci_program_runs_and_its_output_comes_back() -> None:
    async with mcp_session() as session:
        result = await run_code(session, code=FIBONACCI_PROGRAM)
        shell = await run_code(session, code="echo out; echo err >&2; exit 3", language="bash")

    assert result["stdout"] == "63245986\n"
    assert result["exit_code"] == 0
    assert result["status"] == "exit code 0"
    assert result["timed_out"] is False
    assert (shell["stdout"], shell["stderr"], shell["exit_code"]) == ("out\n", "err\n", 3)


async def test_timeout_is_reported_in_the_result() -> None:
    async with mcp_session() as session:
        started = time.monotonic()
        result = await run_code(session, code=SLEEPER, timeout=1.5)
        elapsed = time.monotonic() - started

    assert result["timed_out"] is True
    assert result["timeout"] == 1.5
    assert result["stdout"] == "started\n"
    assert result["status"] == "timed out after 1.5s"
    assert elapsed < 30  # the program wanted 60 s


async def test_out_of_memory_is_reported_in_the_result() -> None:
    async with mcp_session() as session:
        result = await run_code(session, code=MEMORY_HOG, memory_mb=64)

    assert result["oom_killed"] is True
    assert result["memory_limit_bytes"] == 64 * 1024 * 1024
    assert result["status"] == "killed: out of memory (limit 64 MiB)"


MALFORMED_CALLS = {
    "wrong-type": ("run_code", {"code": 42}, "/code: 42 is not of type 'string'"),
    "wrong-type-123": ("run_code", {"code": 123}, "/code: 123 is not of type 'string'"),
    "missing-code": ("run_code", {}, "code"),
    "wrong-timeout-type": ("run_code", {"code": "print(1)", "timeout": "soon"}, "/timeout"),
    "unknown-argument": ("run_code", {"code": "print(1)", "shell": True}, "/shell: unexpected"),
    "unknown-language": ("run_code", {"code": "print(1)", "language": "cobol"}, "cobol"),
    "oversized-code": (
        "run_code",
        {"code": "x" * (1024 * 1024 + 1)},
        "this server accepts at most 1048576",
    ),
    "empty-code": ("run_code", {"code": "   "}, "no code to run"),
}

ABOVE_THE_LIMITS = {
    "more-time": ({"timeout": 30}, "/timeout: 30 is greater than the maximum of 5.0"),
    "more-memory": ({"memory_mb": 4096}, "/memory_mb: 4096 is greater than the maximum of 128"),
    "network": ({"network": True}, "/network: True is not one of [False]"),
    "zero-time": ({"timeout": 0}, "/timeout: 0 is less than or equal to the minimum of 0"),
}


async def _refusal(session: ClientSession, tool: str, arguments: dict[str, object]) -> str:
    """The text of a tool execution error (``isError``), which the client's model reads."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result
    assert result.structured_content is None
    [content] = result.content
    assert content.type == "text"
    return content.text


async def test_refused_arguments_are_tool_errors_the_model_can_read() -> None:
    # One server for every case (each starts a process); the message names the case.
    async with mcp_session() as session:
        refusals = {
            case: await _refusal(session, tool, arguments)
            for case, (tool, arguments, _) in MALFORMED_CALLS.items()
        }
        # A tool the server does not have is the one protocol error.
        with pytest.raises(MCPError) as unknown:
            await session.call_tool("delete_everything", {})
        # The server is still there and serves the next call.
        assert (await run_code(session, code="print('still here')"))["stdout"] == "still here\n"

    for case, (_, _, expected) in MALFORMED_CALLS.items():
        assert expected in refusals[case], (case, refusals[case])
    assert unknown.value.code == INVALID_PARAMS
    assert "Unknown tool: 'delete_everything'" in unknown.value.message


async def test_a_client_cannot_raise_the_servers_limits() -> None:
    async with mcp_session("--timeout", "5", "--memory", "128m") as session:
        refusals = {
            case: await _refusal(session, "run_code", {"code": "print(1)", **arguments})
            for case, (arguments, _) in ABOVE_THE_LIMITS.items()
        }

    for case, (_, expected) in ABOVE_THE_LIMITS.items():
        assert expected in refusals[case], (case, refusals[case])


async def test_a_client_may_lower_the_limits_and_use_the_network_the_server_allows() -> None:
    count_interfaces = "import os\nprint(sorted(os.listdir('/sys/class/net')))\n"
    async with mcp_session("--timeout", "5", "--allow-network") as session:
        lowered = await run_code(session, code="print(1)", timeout=2, memory_mb=64)
        offline = await run_code(session, code=count_interfaces)
        online = await run_code(session, code=count_interfaces, network=True)

    assert (lowered["timeout"], lowered["memory_limit_bytes"]) == (2.0, 64 * 1024 * 1024)
    assert offline["stdout"] == "['lo']\n"
    assert online["stdout"] != "['lo']\n"
    assert "lo" in str(online["stdout"])


async def test_text_files_go_in_and_the_plot_comes_back() -> None:
    async with mcp_session() as session:
        result = await run_code(session, code=CSV_TO_PNG_PROGRAM, files={"data.csv": CSV})
        refusal = await _refusal(
            session, "run_code", {"code": "print(1)", "files": {"../escape.txt": "x"}}
        )

    assert result["stdout"] == CSV_SUMMARY, result["stderr"]
    [plot] = result["artifacts"]
    assert (plot["name"], plot["media_type"]) == ("plot.png", "image/png")
    assert png_size(base64.b64decode(plot["data_base64"])) == (120, 80)
    assert result["artifacts_truncated"] is False
    assert "input file name '../escape.txt' is refused" in refusal


async def test_eight_parallel_calls_all_come_back_right() -> None:
    async with mcp_session() as session:
        results = await asyncio.gather(
            *(run_code(session, code=f"print({n} * {n})") for n in range(8))
        )

    assert [result["stdout"] for result in results] == [f"{n * n}\n" for n in range(8)]
    assert all(result["exit_code"] == 0 for result in results)


async def test_no_container_is_left_when_the_client_disconnects_mid_run() -> None:
    async with mcp_session("--timeout", "60") as session:
        (server_pid,) = sandcrew_mcp_children(os.getpid())
        call = asyncio.ensure_future(run_code(session, code=SLEEPER))
        await _until_a_container_runs(server_pid)
        call.cancel()

    assert wait_until_gone(server_pid) == []


def test_no_container_is_left_when_the_client_is_killed_mid_run() -> None:
    parameters = server_parameters("--timeout", "60")
    client_script = textwrap.dedent(
        f"""
        import asyncio
        from mcp import ClientSession, StdioServerParameters, stdio_client

        async def main():
            parameters = StdioServerParameters.model_validate_json({parameters.model_dump_json()!r})
            async with stdio_client(parameters) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                await s.call_tool("run_code", {{"code": {SLEEPER!r}}})

        asyncio.run(main())
        """
    )
    client = subprocess.Popen([sys.executable, "-c", client_script], stderr=subprocess.DEVNULL)
    try:
        server_pid = _wait_for(lambda: next(iter(sandcrew_mcp_children(client.pid)), None))
        asyncio.run(_until_a_container_runs(server_pid))
        client.send_signal(signal.SIGKILL)
    finally:
        client.kill()
        client.wait()

    assert wait_until_gone(server_pid) == []


async def _until_a_container_runs(server_pid: int) -> None:
    deadline = time.monotonic() + 60
    while not our_containers(shared_client(), owner_pid=server_pid):
        assert time.monotonic() < deadline, "the run never started a container"
        await asyncio.sleep(0.1)


def _wait_for(probe: object) -> int:
    assert callable(probe)
    deadline = time.monotonic() + 30
    while (found := probe()) is None:
        assert time.monotonic() < deadline, "the client never started `sandcrew mcp`"
        time.sleep(0.05)
    assert isinstance(found, int)
    return found


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (("--memory", "10m"), "error: the MCP server needs a memory limit of at least 16m"),
        (("--transport", "carrier-pigeon"), "error: --transport must be stdio or streamable-http"),
        (
            ("--timeout", "0"),
            "error: invalid settings: sandbox.timeout (command line): timeout must be > 0",
        ),
    ],
    ids=["too-little-memory", "unknown-transport", "zero-timeout"],
)
def test_bad_server_options_are_one_line_errors(arguments: tuple[str, ...], expected: str) -> None:
    completed = run_cli("mcp", *arguments, stdin="")

    assert completed.returncode == 2
    assert completed.stderr.startswith(expected), completed.stderr
    assert completed.stderr.count("\n") == 1


def test_a_closed_standard_input_is_a_one_line_error() -> None:
    # Python leaves sys.stdin None; a file opened later could take descriptor 0 and be
    # read as the client's messages.
    completed = subprocess.run(
        ["sh", "-c", 'exec "$0" -m sandcrew mcp <&-', sys.executable],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert completed.returncode == 2
    assert completed.stderr == (
        "error: the stdio transport needs standard input and output (a client's pipes), and "
        "one is closed; start it from an MCP client, or use --transport streamable-http\n"
    )


def test_sigterm_mid_run_removes_the_container_and_exits_as_a_stopped_command() -> None:
    with stdio_server_running_a_sleeper() as server:
        server.send_signal(signal.SIGTERM)  # its client still holds its input open
        exit_code = server.wait(timeout=60)
        said = server.stderr.read().decode()  # type: ignore[union-attr]
        # Removed by the server before it exited, not later by another process's reaper.
        left = our_containers(shared_client(), owner_pid=server.pid)

    assert exit_code == 130  # the one exit-code table: SIGTERM stops a server as Ctrl-C does
    assert said == (
        "Interrupted: the server stopped; its calls in flight were cancelled "
        "and their containers removed.\n"
    )
    assert left == []


def test_the_end_of_its_input_mid_run_ends_the_server_and_removes_the_container() -> None:
    with stdio_server_running_a_sleeper() as server:
        server.stdin.close()  # type: ignore[union-attr]
        exit_code = server.wait(timeout=60)
        said = server.stderr.read().decode()  # type: ignore[union-attr]
        left = our_containers(shared_client(), owner_pid=server.pid)

    assert exit_code == 0
    assert said == ""
    assert left == []


@contextlib.contextmanager
def stdio_server_running_a_sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """`sandcrew mcp` over stdio, initialized by raw JSON-RPC lines, its container running."""
    parameters = server_parameters("--timeout", "60")
    server = subprocess.Popen(
        [parameters.command, *parameters.args],
        env=parameters.env,
        cwd=parameters.cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert server.stdin is not None
    assert server.stdout is not None
    try:
        for message in _INITIALIZE_THEN_RUN_SLEEPER:
            server.stdin.write(json.dumps(message).encode() + b"\n")
        server.stdin.flush()
        assert json.loads(server.stdout.readline())["id"] == 1  # initialized
        asyncio.run(_until_a_container_runs(server.pid))
        yield server
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        for stream in (server.stdin, server.stdout, server.stderr):
            if stream is not None:
                stream.close()


_INITIALIZE_THEN_RUN_SLEEPER = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LATEST_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "run_code", "arguments": {"code": SLEEPER}},
    },
]
