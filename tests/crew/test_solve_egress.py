"""`sandcrew solve --allow-host`: the coder's program reaches the allowed host only, and the
runner tells the model why a request was denied (the hosts are the test's loopback servers)."""

from __future__ import annotations

import json

import pytest

from sandcrew.testing import ScriptedModelServer, Turn
from tests.crew.conftest import coder_turn, review_turn, run_cli
from tests.egress_servers import upstream_server

pytestmark = pytest.mark.docker


def test_solve_runs_with_the_network_policy_and_tells_the_model_what_was_denied(
    scripted_model_server: ScriptedModelServer,
) -> None:
    with upstream_server("localhost") as local:
        program = (
            "import urllib.request, urllib.error\n"
            f"print(urllib.request.urlopen('http://localhost:{local.port}/hello').read().decode())\n"
            "try:\n"
            "    urllib.request.urlopen('http://pypi.example/simple/')\n"
            "except urllib.error.HTTPError as error:\n"
            "    print('refused', error.code)\n"
        )
        scripted_model_server.add(
            coder_turn(f"```python\n{program}```"),
            review_turn(),
            Turn(agent="admin", contains="[RUNNER_RESULT]", content="Done.\n[COMPLETE]"),
        )
        completed = run_cli(
            "solve",
            "Fetch the greeting.",
            "--base-url",
            scripted_model_server.base_url,
            "--model",
            "scripted",
            "--allow-host",
            f"localhost:{local.port}",
            "--json",
        )
    assert completed.returncode == 0, completed.stderr
    assert [request.path for request in local.requests] == ["/hello"]
    admin_request = next(
        request
        for request in scripted_model_server.requests
        if request.agent == "admin" and "[RUNNER_RESULT]" in json.dumps(request.messages)
    )
    seen = json.dumps(admin_request.messages)
    assert "hello from localhost" in seen
    assert "refused 403" in seen
    assert "denied GET pypi.example:80" in seen
    assert "not on the allow-list (allowed: localhost:" in seen
    [run] = json.loads(completed.stdout)["runs"]
    assert [event["decision"] for event in run["network"]["events"]] == ["allowed", "denied"]
