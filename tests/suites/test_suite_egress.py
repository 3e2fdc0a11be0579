"""`sandcrew suite run --allow-host`: each task's throwaway run gets the network policy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.egress_servers import upstream_server

pytestmark = pytest.mark.docker


def _suite(port: int) -> str:
    return f"""\
name: fetching
tasks:
  - id: greeting
    kind: answer
    prompt: What does the local server say?
    expected: {{regex: "hello from localhost"}}
    solution: |
      import urllib.request
      print(urllib.request.urlopen("http://localhost:{port}/").read().decode())
  - id: outside
    kind: answer
    prompt: Can the run reach another host?
    expected: {{regex: "refused 403"}}
    solution: |
      import urllib.request, urllib.error
      try:
          urllib.request.urlopen("http://files.example/")
      except urllib.error.HTTPError as error:
          print("refused", error.code)
"""


def test_suite_tasks_run_with_the_network_policy(tmp_path: Path) -> None:
    with upstream_server("localhost") as local:
        suite = tmp_path / "fetching.yaml"
        suite.write_text(_suite(local.port))
        report = tmp_path / "report.json"
        completed = subprocess.run(
            [
                sys.executable,
                "-m",
                "sandcrew",
                "suite",
                "run",
                str(suite),
                "-s",
                "canonical",
                "--allow-host",
                f"localhost:{local.port}",
                "--report",
                str(report),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    results = json.loads(report.read_text())["results"]
    statuses = {task["task_id"]: task["status"] for task in results}
    assert statuses == {"greeting": "pass", "outside": "pass"}
    assert [request.path for request in local.requests] == ["/"]


def test_suite_refuses_a_network_policy_with_batch_isolation(tmp_path: Path) -> None:
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "sandcrew",
            "suite",
            "run",
            "basics",
            "-s",
            "canonical",
            "--isolation",
            "batch",
            "--allow-host",
            "pypi.org",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 2
    assert "need --isolation task" in completed.stderr
