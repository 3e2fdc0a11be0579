"""`sandcrew run` and `sandcrew repl` with `--allow-host`/`--secret-header`, as real
processes: the hosts are servers this test starts on the machine's loopback, named
`localhost` (the entry that allows it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandcrew.sandbox._egress_tls import CertificateAuthority
from tests.egress_servers import upstream_server
from tests.process import run_cli

pytestmark = pytest.mark.docker

TOKEN = "cli-secret-5b1f0c2e9d7a4e38"

_FETCH = """
import json, urllib.request, urllib.error
def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=15) as answer:
            return [answer.status, answer.read().decode()]
    except urllib.error.HTTPError as error:
        return [error.code, error.read().decode()]
    except OSError as error:
        return [None, str(error)]
"""


def test_run_allows_a_named_host_and_reports_the_rest() -> None:
    with upstream_server("localhost") as local:
        code = _FETCH + (
            f"print(json.dumps([fetch('http://localhost:{local.port}/hello'), "
            "fetch('http://denied.example/')]))"
        )
        finished = run_cli(
            "run", "-", "--allow-host", f"localhost:{local.port}", "--json", stdin=code
        )
    assert finished.returncode == 0, finished.stderr
    document = json.loads(finished.stdout)
    allowed, denied = json.loads(document["stdout"])
    assert allowed == [200, "hello from localhost\n"]
    assert denied[0] == 403
    assert "denied.example:80 is not on the allow-list" in denied[1]
    events = document["network"]["events"]
    assert [(event["host"], event["decision"], event["status"]) for event in events] == [
        ("localhost", "allowed", 200),
        ("denied.example", "denied", 403),
    ]
    assert [request.path for request in local.requests] == ["/hello"]


def test_run_shows_denied_requests_below_the_output() -> None:
    code = _FETCH + "print(fetch('http://denied.example/')[0])"
    finished = run_cli("run", "-", "--allow-host", "pypi.org", stdin=code)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == "403\n"
    assert (
        "denied GET denied.example:80 → 403: denied.example:80 is not on the allow-list "
        "(allowed: pypi.org)" in finished.stderr
    )


def test_run_adds_a_secret_header_the_program_never_sees(tmp_path: Path) -> None:
    authority = CertificateAuthority("sandcrew test upstream authority")
    roots = tmp_path / "roots.pem"
    roots.write_bytes(authority.certificate_pem)
    with upstream_server("localhost", authority=authority) as local:
        code = _FETCH + (
            "import os\n"
            f"print(json.dumps([fetch('https://localhost:{local.port}/echo'), "
            "sorted(os.environ)]))"
        )
        finished = run_cli(
            "run",
            "-",
            "--secret-header",
            f"localhost:{local.port}=Authorization: Bearer {{env:CLI_TEST_TOKEN}}",
            "--json",
            stdin=code,
            # The proxy verifies the upstream against the roots of SSL_CERT_FILE: here the
            # test's authority, standing in for the public ones.
            env={"CLI_TEST_TOKEN": TOKEN, "SSL_CERT_FILE": str(roots)},
        )
    assert finished.returncode == 0, finished.stderr
    assert TOKEN not in finished.stdout + finished.stderr
    document = json.loads(finished.stdout)
    echo, variables = json.loads(document["stdout"])
    assert echo == [200, "you sent: " + "*" * len(f"Bearer {TOKEN}") + "\n"]
    assert "CLI_TEST_TOKEN" not in variables
    assert local.header_values("Authorization") == [f"Bearer {TOKEN}"]
    [event] = document["network"]["events"]
    assert event["injected"] == ["Authorization"]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (("--secret-header", "api.example.com=Authorization: Bearer sk-live-123"), "literal"),
        (("--allow-host", "*.com"), "wildcard"),
        (("--allow-host", "pypi.org", "--network"), "exclude each other"),
    ],
)
def test_bad_network_policies_are_refused_before_a_container_starts(
    arguments: tuple[str, ...], problem: str
) -> None:
    finished = run_cli("run", "-", *arguments, stdin="print(1)")
    assert finished.returncode == 125
    assert problem in finished.stderr
    assert "sk-live-123" not in finished.stderr
    assert finished.stdout == ""


def test_an_unset_secret_variable_is_named() -> None:
    finished = run_cli(
        "run",
        "-",
        "--secret-header",
        "api.example.com=X-Key: {env:CLI_UNSET_TOKEN}",
        stdin="print(1)",
    )
    assert finished.returncode == 125
    assert "CLI_UNSET_TOKEN is not set" in finished.stderr


def test_a_repl_session_reaches_the_named_host_and_nothing_else() -> None:
    with upstream_server("localhost") as local:
        cells = (
            _FETCH.strip()
            + "\n\n"
            + f"print(fetch('http://localhost:{local.port}/hi')[0], "
            + "fetch('http://denied.example/')[0])\n"
        )
        finished = run_cli(
            "repl", "--allow-host", f"localhost:{local.port}", stdin=cells, timeout=120
        )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == "200 403\n"
    assert [request.path for request in local.requests] == ["/hi"]
