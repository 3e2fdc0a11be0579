"""`sandcrew solve --allow-host/--secret-header`: the coder's program reaches the allowed host
only, the runner tells the model why a request was denied, and a secret is used but never
written (the hosts are the test's loopback servers)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from sandcrew.sandbox._egress_tls import CertificateAuthority
from sandcrew.testing import ScriptedModelServer, Turn
from tests.crew.conftest import coder_turn, review_turn, run_cli
from tests.egress_servers import upstream_server

pytestmark = pytest.mark.docker


def solve_running(
    server: ScriptedModelServer, program: str, *flags: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`sandcrew solve --json FLAGS` of a chat whose coder writes ``program`` and whose
    reviewer and admin accept its result."""
    server.add(
        coder_turn(f"```python\n{program}```"),
        review_turn(),
        Turn(agent="admin", contains="[RUNNER_RESULT]", content="Done.\n[COMPLETE]"),
    )
    command = ["solve", "Do it.", "--base-url", server.base_url, "--model", "scripted"]
    return run_cli(*command, *flags, "--json", env=env)


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
        completed = solve_running(
            scripted_model_server, program, "--allow-host", f"localhost:{local.port}"
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


def test_a_secret_header_is_used_but_never_in_the_transcript_or_the_chat(
    scripted_model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    token = "solve-secret-7c2d9e41f0a35b86"
    authority = CertificateAuthority("sandcrew test upstream authority")
    roots = tmp_path / "roots.pem"
    roots.write_bytes(authority.certificate_pem)
    transcript = tmp_path / "chat.jsonl"
    with upstream_server("localhost", authority=authority) as local:
        program = (
            "import urllib.request\n"
            f"print(urllib.request.urlopen('https://localhost:{local.port}/echo').read().decode(), "
            "end='')\n"
        )
        completed = solve_running(
            scripted_model_server,
            program,
            "--secret-header",
            f"localhost:{local.port}=Authorization: Bearer {{env:SOLVE_TEST_TOKEN}}",
            "--transcript",
            str(transcript),
            env={"SOLVE_TEST_TOKEN": token, "SSL_CERT_FILE": str(roots)},
        )
    assert completed.returncode == 0, completed.stderr
    assert local.header_values("Authorization") == [f"Bearer {token}"]
    written = transcript.read_text()
    assert token not in written
    assert token not in completed.stdout + completed.stderr
    assert token not in json.dumps([request.messages for request in scripted_model_server.requests])
    [run] = json.loads(completed.stdout)["runs"]
    assert run["stdout"] == "you sent: " + "*" * len(f"Bearer {token}") + "\n"
    [event] = run["network"]["events"]
    assert event["injected"] == ["Authorization"]
    assert '"injected":["Authorization"]' in written.replace(" ", "")
