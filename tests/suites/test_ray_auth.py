"""A Ray head that wants token authentication (Ray ≥ 2.52 turns it on whenever a token is
around): a driver without the cluster's token is told so within the check's bound, naming
the variables to set, and with them set it runs (see ``ray_cluster`` for the head)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandcrew.suites import read_json_report
from sandcrew.suites._ray_executor import CONNECT_TIMEOUT
from tests.process import run_cli
from tests.suites.ray_cluster import RayCluster, head_alone

pytestmark = [pytest.mark.docker, pytest.mark.ray]

TOKEN = secrets.token_hex(32)


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    # A home of its own: the head's Ray keeps nothing in the user's ~/.ray.
    home = tmp_path_factory.mktemp("ray-home")
    with head_alone({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN, "HOME": str(home)}) as up:
        yield up


def _run_on(head: RayCluster, tmp_path: Path, environment: dict[str, str]) -> tuple[int, str]:
    # The driver's own home holds no token: only what the environment says.
    (tmp_path / "home").mkdir(exist_ok=True)
    done = run_cli(
        "suite", "run", "basics", "-s", "canonical", "-k", "fibonacci", "--executor", "ray",
        "--address", head.address, "--report", str(tmp_path / "report.json"),
        env={"HOME": str(tmp_path / "home"), "RAY_AUTH_MODE": "", "RAY_AUTH_TOKEN": "",
             "COLUMNS": "200", **environment},
        timeout=240,
    )  # fmt: skip
    return done.returncode, done.stderr


def test_a_driver_without_the_token_is_told_which_variables_to_set(
    head: RayCluster, tmp_path: Path
) -> None:
    exit_code, stderr = _run_on(head, tmp_path, {})

    assert exit_code == 2, stderr
    assert stderr.splitlines()[-1] == (
        f"error: the Ray cluster at {head.address} requires token authentication (Ray: "
        "InvalidAuthToken) and this process sends no token: set RAY_AUTH_MODE=token and "
        "RAY_AUTH_TOKEN (or a file named by RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token) to "
        "the cluster's token, which `ray get-auth-token` prints on the head; or start every "
        "node with RAY_AUTH_MODE=disabled (a private network only)"
    )


def test_a_wrong_token_is_named_as_such(head: RayCluster, tmp_path: Path) -> None:
    wrong = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    exit_code, stderr = _run_on(head, tmp_path, wrong)

    assert exit_code == 2, stderr
    assert stderr.splitlines()[-1].startswith(
        f"error: the Ray cluster at {head.address} refused this process's token (Ray: "
        "InvalidAuthToken): RAY_AUTH_TOKEN"
    )


def test_the_refusal_comes_within_the_checks_bound(head: RayCluster, tmp_path: Path) -> None:
    # The documented bound of the check (Ray's own join gives up after about 20 s), timed in
    # a driver process of its own, once Ray is imported.
    timed = (
        "import sys, time\n"
        "import ray\n"
        "from sandcrew.suites import RayExecutor\n"
        "started = time.monotonic()\n"
        "try:\n"
        "    RayExecutor(address=sys.argv[1]).check_reachable()\n"
        "except Exception as error:\n"
        "    print(type(error).__name__)\n"
        "print(time.monotonic() - started)\n"
    )
    env = {**os.environ, "HOME": str(tmp_path), "RAY_AUTH_MODE": "", "RAY_AUTH_TOKEN": ""}
    done = subprocess.run(
        [sys.executable, "-c", timed, head.address],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    refused, seconds = done.stdout.split()
    assert refused == "ConfigurationError"
    assert float(seconds) < CONNECT_TIMEOUT + 1.0


def test_with_the_variables_the_docs_name_the_suite_runs(head: RayCluster, tmp_path: Path) -> None:
    exit_code, stderr = _run_on(head, tmp_path, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN})

    assert exit_code == 0, stderr
    report = read_json_report(tmp_path / "report.json")
    assert [(result.task_id, result.status.value) for result in report.results] == [
        ("fibonacci-39", "pass")
    ]
    assert report.executor == "ray"
