"""Fixtures of the MCP server tests."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def http_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`sandcrew mcp` over streamable HTTP on a free loopback port; its URL and process.

    Extra options come from ``@pytest.mark.server_options(...)``.
    """
    marker = request.node.get_closest_marker("server_options")
    extra = marker.args if marker is not None else ()
    port = _free_port()
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "sandcrew", "mcp", "--transport", "streamable-http"),
            *("--host", "127.0.0.1", "--port", str(port), "--timeout", "5", *extra),
        ],
        cwd=REPOSITORY,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while True:
        assert server.poll() is None, server.stderr.read() if server.stderr else ""
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                break
        assert time.monotonic() < deadline, "the HTTP server never listened"
        time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}/mcp", server
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        finally:
            server.kill()
            if server.stderr is not None:
                server.stderr.close()
