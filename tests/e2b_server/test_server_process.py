"""`sandcrew e2b` as a process: what it prints, what it refuses, and what SIGTERM leaves."""

from __future__ import annotations

import signal

import pytest
from e2b import RateLimitException
from e2b_code_interpreter import Sandbox

from tests.e2b_server.helpers import e2b_server
from tests.process import run_cli
from tests.sandbox.helpers import our_containers, shared_client, wait_until_gone

pytestmark = pytest.mark.docker


def test_sigterm_kills_every_sandbox_and_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    with e2b_server(api_key=None) as server:
        assert server.api_key.startswith("e2b_")  # generated and printed
        server.point_sdk_here(monkeypatch)
        busy, idle = Sandbox.create(), Sandbox.create()
        idle.run_code("x = 1")
        handle = busy.commands.run("sleep 300", background=True)
        assert len(our_containers(shared_client(), owner_pid=server.process.pid)) == 2
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=60) == 130
        assert wait_until_gone(server.process.pid) == []
        del handle


def test_past_its_limit_a_create_is_refused_until_a_kill_makes_room_and_ctrl_c_cleans_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with e2b_server("--max-sandboxes", "1") as server:
        server.point_sdk_here(monkeypatch)
        first = Sandbox.create()
        with pytest.raises(RateLimitException, match=r"its limit \(e2b\.max_sandboxes\)"):
            Sandbox.create()
        first.kill()
        second = Sandbox.create()
        assert second.run_code("21 * 2").text == "42"
        server.process.send_signal(signal.SIGINT)
        assert server.process.wait(timeout=60) == 130
        assert wait_until_gone(server.process.pid) == []


def test_beyond_loopback_a_key_of_ones_own_is_needed() -> None:
    refused = run_cli("e2b", "--host", "0.0.0.0", "--port", "0", timeout=60)
    assert refused.returncode == 2
    assert "--api-key" in refused.stderr
    short = run_cli("e2b", "--port", "0", env={"SANDCREW_E2B__API_KEY": "short"}, timeout=60)
    assert short.returncode == 2
    assert "at least 16" in short.stderr
