"""Start `sandcrew mcp` as a real child process and drive it with the MCP SDK's own client."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.sandbox.helpers import wait_until_gone


def server_parameters(*args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    """``python -m sandcrew mcp ARGS`` with the test's hermetic environment."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if name.startswith(("SANDCREW_", "OPENAI_", "DOCKER_"))
    }
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "sandcrew", "mcp", *args],
        env={**environment, **(env or {})},
        cwd=str(Path(__file__).resolve().parents[2]),
    )


@contextlib.asynccontextmanager
async def mcp_session(
    *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized client session with a fresh `sandcrew mcp` over stdio."""
    async with (
        stdio_client(server_parameters(*args, env=env)) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def sandcrew_mcp_children(parent: int) -> list[int]:
    """Pids of the `sandcrew mcp` processes whose parent is ``parent``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent_pid = int(stat.rsplit(")", 1)[1].split()[1])
        if parent_pid == parent and b"sandcrew" in command and b"mcp" in command:
            found.append(int(entry.name))
    return found


@contextlib.contextmanager
def http_mcp_server(
    *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``sandcrew mcp --transport streamable-http`` on a loopback port of its own choosing
    (``--port 0``, named by its first line: a port chosen here could be taken by another
    test worker before the server binds it): its URL and process."""
    import select
    import signal

    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "sandcrew", "mcp", "--transport", "streamable-http"),
            *("--host", "127.0.0.1", "--port", "0", *args),
        ],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, **(env or {})},
        stderr=subprocess.PIPE,
    )
    assert server.stderr is not None
    ready, _, _ = select.select([server.stderr], [], [], 60)
    first_line = server.stderr.readline().decode() if ready else ""
    listening = re.fullmatch(r"listening on (http://127\.0\.0\.1:\d+/mcp)\n", first_line)
    if listening is None:
        server.kill()
        said = first_line + server.stderr.read().decode()
        server.wait()
        raise AssertionError(f"the HTTP server never listened: {said!r}")
    try:
        yield listening.group(1), server
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        finally:
            server.kill()
            if server.stderr is not None:
                server.stderr.close()
        assert wait_until_gone(server.pid) == []
