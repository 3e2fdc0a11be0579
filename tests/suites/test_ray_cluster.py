"""Batch isolation on a real two-node Ray cluster on this machine (see ``ray_cluster``).

Suites and pass@k through the CLI give the local run's verdicts; a worker killed mid-run
costs nothing but a re-run; a driver stopped mid-run leaves no container on the engine;
a node that cannot run the sandbox (no image) is named in a clear error. Faults that need
a cluster of their own are in ``test_ray_node_faults``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest

from sandcrew.errors import ErrorCode, InfrastructureError
from sandcrew.sandbox import SandboxConfig
from sandcrew.sandbox.images import DEFAULT_IMAGES
from sandcrew.suites import (
    AnswerTask,
    CanonicalSolver,
    LocalExecutor,
    RayExecutor,
    Suite,
    TaskResult,
    TaskStatus,
    evaluate_samples,
    load_suite,
    read_json_report,
    run_suite,
)
from tests.process import run_cli
from tests.suites.ray_cluster import (
    CLUSTER_ENV,
    CLUSTER_TEST_MARKS,
    Owner,
    RayCluster,
    containers_of,
    left_after_settling,
    owners,
    two_node_cluster,
)

pytestmark = CLUSTER_TEST_MARKS

SAMPLE_TASKS = ("HumanEval/0", "HumanEval/2", "HumanEval/4")


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    with two_node_cluster() as started:
        yield started


@dataclass(frozen=True)
class _Finished:
    exit_code: int
    output: str


def _cli(*args: str) -> _Finished:
    # A process of its own, as a user runs it: joining a second cluster from a process
    # that already ran (and shut down) a local Ray can hang inside Ray.
    done = run_cli("suite", *args, env={"COLUMNS": "200"}, timeout=240)
    return _Finished(done.returncode, done.stdout + done.stderr)


def _samples() -> list[dict[str, str]]:
    """Per task: right, wrong, crashing; one task also a loop (timeout, then confirmed)."""
    suite = load_suite("humaneval")
    samples = []
    for task_id in SAMPLE_TASKS:
        right = suite.task(task_id).canonical_solution or ""  # type: ignore[union-attr]
        samples += [
            {"task_id": task_id, "completion": right},
            {"task_id": task_id, "completion": "    return None\n"},
            {"task_id": task_id, "completion": "    raise ValueError('not today')\n"},
        ]
    samples.append({"task_id": SAMPLE_TASKS[0], "completion": "    while True:\n        pass\n"})
    return samples


def _write_jsonl(path: Path, records: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def _results(path: Path) -> list[tuple[str, str, bool]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [(line["task_id"], line["result"], line["passed"]) for line in lines]


def test_suite_run_through_the_cli_on_two_nodes_matches_the_local_run(
    cluster: RayCluster, engine: docker.DockerClient, tmp_path: Path
) -> None:
    suite = load_suite("humaneval").filtered(["HumanEval/1?"])
    lines = []
    for task in suite.tasks:
        completion = task.canonical_solution or ""  # type: ignore[union-attr]
        if task.id == "HumanEval/12":
            completion = "    return None\n"
        elif task.id == "HumanEval/15":
            completion = "    raise ValueError('not today')\n"
        lines.append({"task_id": task.id, "completion": completion})
    completions = _write_jsonl(tmp_path / "completions.jsonl", lines)
    reports = {}
    for where, options in (
        ("local", ["--isolation", "batch"]),
        ("ray", ["--executor", "ray", "--address", cluster.address, "--isolation", "batch",
                 "--chunk-size", "3"]),
    ):  # fmt: skip
        reports[where] = tmp_path / f"{where}.json"
        result = _cli(
            "run", "humaneval", "--solver", "completions", "--completions", str(completions),
            "--filter", "HumanEval/1?", "--timeout", "5", *options,
            "--report", str(reports[where]), "--allow-failures",
        )  # fmt: skip
        assert result.exit_code == 0, result.output

    local, ray = (read_json_report(reports[where]) for where in ("local", "ray"))
    # Each run has its own random work dir, named in a traceback; the rest is the same.
    verdicts = [(r.task_id, r.status, r.detail.splitlines()[-1:]) for r in ray.results]
    assert verdicts == [(r.task_id, r.status, r.detail.splitlines()[-1:]) for r in local.results]
    statuses = {task_id: status for task_id, status, _ in verdicts}
    assert statuses.pop("HumanEval/12") is TaskStatus.FAIL
    assert statuses.pop("HumanEval/15") is TaskStatus.FAIL
    assert set(statuses.values()) == {TaskStatus.PASS}
    assert len(statuses) == 8
    assert ray.executor == "ray, batch container"
    assert not any(r.retries for r in ray.results)
    assert containers_of(engine, cluster.owners()) == []


def test_pass_at_k_through_the_cli_on_two_nodes_matches_the_local_run(
    cluster: RayCluster, engine: docker.DockerClient, tmp_path: Path
) -> None:
    samples = _samples()
    local_file = _write_jsonl(tmp_path / "local.jsonl", samples)
    ray_file = _write_jsonl(tmp_path / "ray.jsonl", samples)
    local = asyncio.run(
        evaluate_samples(
            local_file,
            ks=(1, 2),
            check_timeout=2.0,
            ignore_incomplete=True,
            executor=LocalExecutor("batch"),
        )
    )

    result = _cli(
        "evaluate", str(ray_file), "--k", "1,2", "--timeout", "2", "--ignore-incomplete",
        "--executor", "ray", "--address", cluster.address, "--isolation", "batch",
        "--chunk-size", "4",
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    theirs = _results(ray_file.with_name(ray_file.name + "_results.jsonl"))
    assert theirs == _results(local.results_path)
    assert [passed for _, _, passed in theirs] == [True, False, False] * 3 + [False]
    assert theirs[-1][1] == "timed out"
    assert theirs[2][1] == "failed: not today"
    for k, value in local.pass_at_k.values.items():
        assert f"pass@{k}: {value:.4f}" in result.output
    assert "(1 confirmed alone)" in result.output
    assert "ray, batch container" in result.output
    assert containers_of(engine, cluster.owners()) == []


def test_a_worker_killed_mid_run_costs_a_rerun_not_a_verdict(
    cluster: RayCluster, engine: docker.DockerClient
) -> None:
    # Each answer takes a second, so that chunks are surely in flight when a worker dies.
    tasks = tuple(
        AnswerTask(
            id=f"slow-{number}",
            prompt="p",
            expected=number if number % 3 else number + 1,
            solution=f"import time\ntime.sleep(1)\nprint({number})",
        )
        for number in range(8)
    )
    suite = Suite(name="slow", source="test", tasks=tasks)
    reported: list[TaskResult] = []
    killed: set[Owner] = set()
    first_result = threading.Event()

    def kill_a_worker() -> None:
        first_result.wait(timeout=120)
        for _ in range(100):
            running = cluster.workers_running("run_chunk")
            if running:
                killed.update(owners({running[0]}))
                os.kill(running[0], signal.SIGKILL)
                return
            time.sleep(0.1)

    def on_result(result: TaskResult) -> None:
        reported.append(result)
        first_result.set()

    killer = threading.Thread(target=kill_a_worker)
    killer.start()
    try:
        report = asyncio.run(
            run_suite(
                suite,
                CanonicalSolver(),
                executor=RayExecutor(address=cluster.address, isolation="batch", chunk_size=3),
                sandbox_config=SandboxConfig(timeout=10),
                on_result=on_result,
            )
        )
    finally:
        first_result.set()
        killer.join()

    assert killed, "no worker was running a chunk"
    assert sorted(r.task_id for r in reported) == sorted(task.id for task in tasks)  # once each
    expected = {task.id: TaskStatus.FAIL if number % 3 == 0 else TaskStatus.PASS
                for number, task in enumerate(tasks)}  # fmt: skip
    assert {r.task_id: r.status for r in report.results} == expected
    rerun = [r for r in report.results if r.retries]
    assert rerun, "the killed worker's unfinished tasks were not re-run"
    for result in rerun:
        assert "its Ray worker on node " in result.retries[0]
        assert "was lost" in result.retries[0]
    assert containers_of(engine, cluster.owners() | killed) == []


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_driver_stopped_mid_run_leaves_no_container(
    cluster: RayCluster, engine: docker.DockerClient, tmp_path: Path, stop: signal.Signals
) -> None:
    samples = [
        {"task_id": task_id, "completion": "    while True:\n        pass\n"}
        for task_id in SAMPLE_TASKS
    ]
    samples_file = _write_jsonl(tmp_path / "loops.jsonl", samples)
    driver = subprocess.Popen(
        [
            sys.executable, "-m", "sandcrew", "suite", "evaluate", str(samples_file),
            "--k", "1", "--timeout", "30", "--ignore-incomplete",
            "--executor", "ray", "--address", cluster.address, "--isolation", "batch",
            "--chunk-size", "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, **CLUSTER_ENV},
    )  # fmt: skip
    driver_owner = owners({driver.pid})
    try:
        deadline = time.monotonic() + 90
        while not containers_of(engine, cluster.owners()) and time.monotonic() < deadline:
            assert driver.poll() is None, driver.stdout.read() if driver.stdout else ""
            time.sleep(0.2)
        assert containers_of(engine, cluster.owners()), "no container started on the cluster"
        driver.send_signal(stop)
        output, _ = driver.communicate(timeout=90)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()

    assert driver.returncode == 130, output.decode(errors="replace")
    assert b"Interrupted" in output
    assert left_after_settling(engine, cluster.owners() | driver_owner) == []
    assert not samples_file.with_name(samples_file.name + "_results.jsonl").exists()


@pytest.mark.parametrize(
    "moment",
    ["1s", "2.5s", "4s", "first-container"],
    ids=["after-1s", "after-2.5s", "after-4s", "as-the-first-container-appears"],
)
def test_a_driver_stopped_early_leaves_no_container(
    cluster: RayCluster, engine: docker.DockerClient, tmp_path: Path, moment: str
) -> None:
    # Stopped while chunks are scheduled and their batch containers are being launched:
    # each worker ends what it launched, even a container still starting, before the
    # driver exits.
    samples = [
        {"task_id": task_id, "completion": "    while True:\n        pass\n"}
        for task_id in SAMPLE_TASKS * 4
    ]
    samples_file = _write_jsonl(tmp_path / "loops.jsonl", samples)
    started = time.monotonic()
    driver = subprocess.Popen(
        [
            sys.executable, "-m", "sandcrew", "suite", "evaluate", str(samples_file),
            "--k", "1", "--timeout", "30", "--ignore-incomplete",
            "--executor", "ray", "--address", cluster.address, "--isolation", "batch",
            "--chunk-size", "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, **CLUSTER_ENV},
    )  # fmt: skip
    driver_owner = owners({driver.pid})
    try:
        if moment == "first-container":
            deadline = started + 90
            while not containers_of(engine, cluster.owners()) and time.monotonic() < deadline:
                assert driver.poll() is None, driver.stdout.read() if driver.stdout else ""
                time.sleep(0.02)
        else:
            time.sleep(max(0.0, started + float(moment.rstrip("s")) - time.monotonic()))
        driver.send_signal(signal.SIGINT)
        output, _ = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    left = left_after_settling(engine, cluster.owners() | driver_owner)

    # 130: interrupted; -SIGINT: interrupted while the command was still importing, before
    # its own handling of Ctrl-C was in place (Python then ends by the signal).
    assert driver.returncode in (130, -signal.SIGINT), output.decode(errors="replace")
    assert left == [], f"stopped {moment} in: {len(left)} containers left"


def test_a_node_without_the_image_is_named_in_a_clear_error(
    cluster: RayCluster, engine: docker.DockerClient
) -> None:
    absent = "sandcrew/absent-from-every-node:never"
    config = SandboxConfig(images={**DEFAULT_IMAGES, "python": absent})
    suite = Suite(
        name="one",
        source="test",
        tasks=(AnswerTask(id="a", prompt="p", expected=1, solution="print(1)"),),
    )
    with pytest.raises(InfrastructureError) as raised:
        asyncio.run(
            run_suite(
                suite,
                CanonicalSolver(),
                executor=RayExecutor(address=cluster.address, isolation="batch"),
                sandbox_config=config,
            )
        )
    assert raised.value.code is ErrorCode.IMAGE_NOT_FOUND
    assert str(raised.value).startswith("on Ray node ")
    assert "node id " in str(raised.value)
    assert absent in str(raised.value)
    assert containers_of(engine, cluster.owners()) == []
