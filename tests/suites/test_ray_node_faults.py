"""Node faults on real two-node Ray clusters of their own (see ``ray_cluster``), one at a
time: a whole node lost mid-run costs re-runs on the other node, not verdicts; a node
without Docker is named in a clear error within seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import docker

from sandcrew.suites import TaskStatus, read_json_report
from tests.process import run_cli
from tests.suites.ray_cluster import (
    CLUSTER_ENV,
    CLUSTER_TEST_MARKS,
    Owner,
    containers_of,
    described,
    left_after_settling,
    two_node_cluster,
)

pytestmark = CLUSTER_TEST_MARKS


SLOW_SUITE = """
name: slow
tasks:
""" + "".join(
    f"""  - id: slow-{number}
    kind: answer
    prompt: p
    expected: {{number: {number if number % 3 else number + 1}}}
    solution: |
      import time
      time.sleep(1)
      print({number})
"""
    for number in range(8)
)
"""Eight answers that take a second each; every third one is wrong."""


def test_a_node_lost_mid_run_costs_reruns_on_the_other_node_not_verdicts(
    engine: docker.DockerClient, tmp_path: Path
) -> None:
    suite_file = tmp_path / "slow.yaml"
    suite_file.write_text(SLOW_SUITE, encoding="utf-8")
    report_file = tmp_path / "report.json"
    with two_node_cluster() as cluster:
        second = cluster.nodes[1]
        driver = subprocess.Popen(
            [
                sys.executable, "-m", "sandcrew", "suite", "run", str(suite_file),
                "--solver", "canonical", "--timeout", "10", "--allow-failures",
                "--executor", "ray", "--address", cluster.address, "--isolation", "batch",
                "--chunk-size", "2", "--report", str(report_file),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, **CLUSTER_ENV, "COLUMNS": "200"},
        )  # fmt: skip
        killed: set[Owner] = set()
        try:
            # The moment the second node runs a chunk's container, the node goes away whole.
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not killed:
                assert driver.poll() is None, driver.stdout.read() if driver.stdout else ""
                if containers_of(engine, cluster.owners_of(second)):
                    killed = cluster.kill_node(second)
                time.sleep(0.1)
            assert killed, "the second node never ran a chunk"
            output, _ = driver.communicate(timeout=240)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
        assert driver.returncode == 0, output.decode(errors="replace")

    report = read_json_report(report_file)
    assert sorted(r.task_id for r in report.results) == [f"slow-{n}" for n in range(8)]  # once each
    assert {r.task_id: r.status for r in report.results} == {
        f"slow-{n}": TaskStatus.FAIL if n % 3 == 0 else TaskStatus.PASS for n in range(8)
    }
    rerun = [r for r in report.results if r.retries]
    assert rerun, "the lost node's unfinished tasks were not re-run"
    assert all("was lost" in r.retries[0] for r in rerun)
    # The lost node's batch containers end with their supervisor's connection; gc removes
    # whatever a killed owner left.
    run_cli("sandbox", "gc", timeout=120)
    assert containers_of(engine, killed) == []


def test_a_node_without_docker_is_named_in_a_clear_error(
    engine: docker.DockerClient, tmp_path: Path
) -> None:
    closed = f"unix://{tmp_path}/no-docker-here.sock"
    suite_file = tmp_path / "slow.yaml"
    suite_file.write_text(SLOW_SUITE, encoding="utf-8")
    with two_node_cluster(second_node_env={"DOCKER_HOST": closed}) as cluster:
        started = time.monotonic()
        done = run_cli(
            "suite", "run", str(suite_file), "--solver", "canonical", "--timeout", "10",
            "--executor", "ray", "--address", cluster.address, "--isolation", "batch",
            "--chunk-size", "1", env={**CLUSTER_ENV, "COLUMNS": "200"}, timeout=240,
        )  # fmt: skip
        took = time.monotonic() - started
        leftovers = left_after_settling(engine, cluster.owners())

    said = done.stdout + done.stderr
    assert done.returncode == 3, said  # the exit code of an infrastructure failure
    assert "on Ray node " in said, said
    assert "node id " in said, said
    assert closed in said, said
    assert "Traceback" not in said
    assert took < 120, f"{took:.0f} s: it should fail, not wait"
    assert leftovers == [], described(engine, leftovers)
