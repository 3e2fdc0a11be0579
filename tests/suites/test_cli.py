"""`sandcrew suite run|list` end to end, on real Docker."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sandcrew.cli import app
from sandcrew.cli.suite import FULL_TABLE_LIMIT
from sandcrew.suites import load_suite, read_json_report
from tests.browser import dump_dom
from tests.process import run_cli
from tests.suites.conftest import WriteFile

SANDCREW = Path(sys.executable).with_name("sandcrew")


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["suite", *args], env={"COLUMNS": "200"})


def sandcrew(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SANDCREW), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.mark.docker
def test_humaneval_canonical_passes_all_164_in_a_batch_and_in_containers(tmp_path: Path) -> None:
    cores = str(os.cpu_count())
    batch_path, containers_path = tmp_path / "batch.json", tmp_path / "containers.json"
    batch = invoke(
        "run", "humaneval", "--solver", "canonical", "-j", cores, "--isolation", "batch",
        "--report", str(batch_path),
    )  # fmt: skip
    # A container per task costs ~0.25 s each here: a tenth of the suite shows that path.
    containers = invoke(
        "run", "humaneval", "--solver", "canonical", "-j", cores, "--filter", "HumanEval/1?",
        "--report", str(containers_path),
    )  # fmt: skip

    assert batch.exit_code == 0, batch.output
    assert "164 tasks: 164 passed, 0 failed, 0 errors, 0 timeouts" in batch.output
    assert read_json_report(batch_path).counts.passed == 164
    assert containers.exit_code == 0, containers.output
    report = read_json_report(containers_path)
    assert report.counts.passed == report.counts.total == 10
    assert all(r.container_runs == 1 for r in report.results)


@pytest.mark.docker
def test_wrong_completions_report_json_and_junit_agree(tmp_path: Path) -> None:
    suite = load_suite("humaneval").filtered(["HumanEval/1?"])
    lines = []
    for task in suite.tasks:
        completion = task.canonical_solution or ""
        if task.id == "HumanEval/12":
            completion = "    return None\n"
        elif task.id == "HumanEval/15":
            completion = "    raise ValueError('not today')\n"
        elif task.id == "HumanEval/17":
            completion = "    while True:\n        pass\n"
        if task.id != "HumanEval/19":
            lines.append(json.dumps({"task_id": task.id, "completion": completion}))
    completions = tmp_path / "samples.jsonl"
    completions.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report_path, junit_path = tmp_path / "r.json", tmp_path / "r.xml"

    result = invoke(
        "run",
        "humaneval",
        "--solver",
        "completions",
        "--completions",
        str(completions),
        "--filter",
        "HumanEval/1?",
        "--timeout",
        "2",
        "--report",
        str(report_path),
        "--junit",
        str(junit_path),
    )
    assert result.exit_code == 1, result.output
    report = read_json_report(report_path)
    not_passing = {r.task_id: r.status.value for r in report.results if not r.passed}
    assert not_passing == {
        "HumanEval/12": "fail",
        "HumanEval/15": "fail",
        "HumanEval/17": "timeout",
        "HumanEval/19": "error",
    }
    assert "ValueError: not today" in report.result_for("HumanEval/15").detail
    assert "10 tasks: 6 passed, 2 failed, 1 error, 1 timeout" in result.output
    for task_id in not_passing:
        assert task_id in result.output

    testsuite = ET.parse(junit_path).getroot().find("testsuite")
    assert testsuite is not None
    counts = report.counts
    assert int(testsuite.get("tests", "-1")) == counts.total == 10
    assert int(testsuite.get("failures", "-1")) == counts.failed + counts.timeouts == 3
    assert int(testsuite.get("errors", "-1")) == counts.errors == 1
    assert int(testsuite.get("skipped", "-1")) == counts.not_run == 0
    failed_cases = {
        case.get("name") for case in testsuite.iter("testcase") if case.find("failure") is not None
    }
    assert failed_cases == {"HumanEval/12", "HumanEval/15", "HumanEval/17"}

    allowed = invoke(
        "run",
        "humaneval",
        "--solver",
        "completions",
        "--completions",
        str(completions),
        "--filter",
        "HumanEval/12",
        "--allow-failures",
    )
    assert allowed.exit_code == 0, allowed.output


def _answers(path: Path, **answers: str) -> Path:
    path.write_text(
        "".join(
            json.dumps({"task_id": k.replace("_", "-"), "completion": v}) + "\n"
            for k, v in answers.items()
        ),
        encoding="utf-8",
    )
    return path


@pytest.mark.docker
def test_piped_suite_table_keeps_a_long_detail_on_one_line(tmp_path: Path) -> None:
    reason = " ".join(f"because-{number}" for number in range(14))  # about 150 characters
    completions = tmp_path / "samples.jsonl"
    completions.write_text(
        json.dumps({"task_id": "HumanEval/0", "completion": f"    raise ValueError({reason!r})\n"})
        + "\n",
        encoding="utf-8",
    )
    environment = {name: value for name, value in os.environ.items() if name != "COLUMNS"}

    completed = subprocess.run(
        [
            str(SANDCREW), "suite", "run", "humaneval", "--solver", "completions",
            "--completions", str(completions), "--filter", "HumanEval/0",
        ],
        capture_output=True, text=True, timeout=120, env=environment,
    )  # fmt: skip

    assert completed.returncode == 1, completed.stderr
    assert any(f"ValueError: {reason}" in line for line in completed.stdout.splitlines()), (
        completed.stdout
    )


def test_a_long_table_says_where_the_passing_tasks_are_listed(
    tmp_path: Path, write_file: WriteFile
) -> None:
    # Answers checked without a container: 41 passing tasks, more than the table lists.
    count = FULL_TABLE_LIMIT + 1
    suite = write_file(
        "many.yaml", "".join(f"- {{id: t{n}, prompt: p, expected: {n}}}\n" for n in range(count))
    )
    completions = write_file(
        "answers.jsonl",
        "".join(
            json.dumps({"task_id": f"t{n}", "completion": f"{n}"}) + "\n" for n in range(count)
        ),
    )
    common = ["suite", "run", str(suite), "-s", "completions", "--completions", str(completions)]

    without_report = sandcrew(*common)
    with_report = sandcrew(*common, "--report", str(tmp_path / "all.json"))

    assert without_report.returncode == 0, without_report.stderr
    assert f"{count} passing tasks not listed (--report FILE writes every task)." in (
        without_report.stdout
    )
    assert with_report.returncode == 0, with_report.stderr
    assert f"{count} passing tasks not listed ({tmp_path / 'all.json'} has every task)." in (
        with_report.stdout
    )
    assert len(read_json_report(tmp_path / "all.json").results) == count


@pytest.mark.docker
def test_baseline_regression_fails_the_run_and_names_the_task(
    tmp_path: Path, write_file: WriteFile
) -> None:
    suite = write_file(
        "quiz.yaml",
        """
        - {id: capital, prompt: "Capital of France?", expected: Paris}
        - {id: sum, prompt: "2 + 2?", expected: 4}
        - {id: year, prompt: "Year of the first Moon landing?", expected: 1969}
        """,
    )
    before = _answers(tmp_path / "before.jsonl", capital="Paris", sum="4", year="1970")
    after = _answers(tmp_path / "after.jsonl", capital="Lyon", sum="4", year="1969")
    baseline = tmp_path / "baseline.json"

    first = invoke(
        "run", str(suite), "-s", "completions", "--completions", str(before),
        "--report", str(baseline), "--allow-failures",
    )  # fmt: skip
    assert first.exit_code == 0, first.output
    assert read_json_report(baseline).result_for("year").status.value == "fail"

    second = invoke(
        "run", str(suite), "-s", "completions", "--completions", str(after),
        "--baseline", str(baseline),
    )  # fmt: skip
    assert second.exit_code == 1, second.output
    assert "1 regression since" in second.output
    assert "capital: pass → fail" in second.output
    assert "expected exactly 'Paris', got 'Lyon'" in second.output
    assert "1 fix:" in second.output
    assert "year: fail → pass" in second.output

    same = invoke(
        "run", str(suite), "-s", "completions", "--completions", str(before),
        "--baseline", str(baseline),
    )  # fmt: skip
    assert same.exit_code == 0, same.output  # still failing is not a regression
    assert "No regressions" in same.output


USAGE_ERRORS = [
    pytest.param(["nonesuch", "-s", "canonical"], "Unknown suite 'nonesuch'", id="unknown-suite"),
    pytest.param(
        ["basics", "-s", "oracle"],
        "'oracle' is not one of 'canonical', 'completions', 'crew'",
        id="unknown-solver",
    ),
    pytest.param(
        ["basics", "-s", "canonical", "-k", "zzz-nothing"],
        "No task of suite 'basics' matches --filter zzz-nothing",
        id="empty-filter",
    ),
    pytest.param(
        ["basics", "-s", "canonical", "--timeout", "-1"],
        "timeout must be > 0 (got -1)",
        id="bad-timeout",
    ),
    pytest.param(
        ["basics", "-s", "canonical", "--address", "x:1"],
        "--address only applies to --executor ray",
        id="stray-address",
    ),
    pytest.param(
        ["basics", "-s", "canonical", "--chunk-size", "5"],
        "--chunk-size only applies to --executor ray",
        id="stray-chunk-size",
    ),
    pytest.param(
        ["basics", "-s", "canonical", "--junit", "/nonexistent/dir/r.xml"],
        "--junit /nonexistent/dir/r.xml: the folder /nonexistent/dir does not exist",
        id="report-folder",
    ),
    pytest.param(
        ["basics", "-s", "canonical", "--baseline", "/nonexistent/base.json"],
        "Cannot read report /nonexistent/base.json",
        id="missing-baseline",
    ),
]


def test_the_default_solver_without_a_model_points_to_the_canonical_one() -> None:
    without_model = {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""}
    completed = run_cli("suite", "run", "basics", env=without_model)

    assert completed.returncode == 2, completed.stderr
    [line] = completed.stderr.splitlines()
    assert line.startswith("error: --solver crew (the default) needs a model: no model configured")
    assert line.endswith(
        "; or check the suite without one: `sandcrew suite run basics --solver canonical` "
        "runs each task's own solution"
    )


def test_baseline_of_another_suite_or_solver_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text(
        json.dumps(
            {"format": 1, "suite": "humaneval", "source": "x", "solver": "crew",
             "executor": "local", "started_at": "2026-01-01T00:00:00Z", "duration": 1.0,
             "results": []}
        ),
        encoding="utf-8",
    )  # fmt: skip
    completed = sandcrew("suite", "run", "basics", "-s", "canonical", "--baseline", str(other))
    assert completed.returncode == 2, completed.stderr
    assert completed.stderr == (
        f"error: --baseline {other} is a report of suite 'humaneval' with solver 'crew'; this "
        "run is suite 'basics' with solver 'canonical', so its verdicts cannot be compared\n"
    )


@pytest.mark.parametrize("scheme", ["", "ray://"], ids=["gcs", "ray-client"])
def test_ray_address_that_does_not_answer_exits_3_naming_it(scheme: str) -> None:
    with socket.socket() as held:
        # Bound but not listening: refused, and no other test can take the port meanwhile.
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        address = f"{scheme}127.0.0.1:{port}"
        completed = subprocess.run(
            [str(SANDCREW), "suite", "run", "basics", "-s", "canonical",
             "--executor", "ray", "--address", address],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    assert completed.returncode == 3, completed.stderr
    assert completed.stderr == (
        f"error: the Ray cluster at {address} does not answer (Connection refused); "
        "start it with `ray start --head` or fix --address\n"
    )


@pytest.mark.parametrize(("args", "message"), USAGE_ERRORS)
def test_usage_errors_exit_2_with_one_clear_line(args: list[str], message: str) -> None:
    completed = sandcrew("suite", "run", *args)
    assert completed.returncode == 2, completed.stderr
    assert message in " ".join(completed.stderr.split())
    assert "Traceback" not in completed.stderr


def test_completions_for_tasks_the_suite_lacks_are_refused(tmp_path: Path) -> None:
    completions = _answers(tmp_path / "c.jsonl", fibonacci_39="63245986", fibonaci_40="1")

    completed = sandcrew(
        "suite", "run", "basics", "-s", "completions", "--completions", str(completions),
        "-k", "fibonacci",
    )  # fmt: skip

    assert completed.returncode == 2, completed.stderr
    assert completed.stderr == (
        f"error: Invalid completions file {completions}: line 2: task_id 'fibonaci-40' is "
        "not a task of suite 'basics'\n"
    )


def test_bad_suite_file_through_the_cli(write_file: WriteFile) -> None:
    path = write_file("bad.yaml", "- {id: a, kind: code, prompt: p, test: t}\n")
    completed = sandcrew("suite", "run", str(path), "-s", "canonical")
    assert completed.returncode == 2, completed.stderr
    assert "task 1 (line 1), id 'a': field 'entry_point' is missing" in " ".join(
        completed.stderr.split()
    )
    assert "Traceback" not in completed.stderr


def test_suite_list_shows_the_shipped_suites() -> None:
    result = invoke("list")
    assert result.exit_code == 0, result.output
    assert "basics" in result.output
    assert "humaneval" in result.output
    assert "164" in result.output


@pytest.mark.docker
def test_ctrl_c_writes_finished_results_and_leaves_no_container(
    tmp_path: Path, write_file: WriteFile
) -> None:
    suite = write_file(
        "slow.yaml",
        "- {id: quick-1, prompt: p, expected: 1, solution: 'print(1)'}\n"
        "- {id: quick-2, prompt: p, expected: 2, solution: 'print(2)'}\n"
        + "".join(
            f"- {{id: slow-{n}, prompt: p, expected: 1, timeout: 60,"
            f" solution: 'import time; time.sleep(60)'}}\n"
            for n in range(4)
        ),
    )
    report_path, junit_path = tmp_path / "r.json", tmp_path / "r.xml"
    page = tmp_path / "r.html"
    process = subprocess.Popen(
        [str(SANDCREW), "suite", "run", str(suite), "-s", "canonical", "-j", "2",
         "--report", str(report_path), "--junit", str(junit_path), "--html", str(page)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    label = f"label=sandcrew.owner-pid={process.pid}"

    def containers() -> list[str]:
        listed = subprocess.run(
            ["docker", "ps", "-a", "-q", "--filter", "label=sandcrew.product=sandcrew",
             "--filter", label],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        return listed.stdout.split()

    progress: list[str] = []
    reader = threading.Thread(
        target=lambda: progress.extend(iter(process.stderr.readline, "")),  # type: ignore[union-attr]
        daemon=True,
    )
    reader.start()
    try:
        deadline = time.monotonic() + 60
        # Piped, every finished task is one progress line; then the slow ones are running.
        while sum(" quick-" in line for line in progress) < 2 or len(containers()) < 2:
            assert process.poll() is None, progress
            assert time.monotonic() < deadline, f"the slow tasks never started: {progress}"
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
        reader.join(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    stderr = "".join(progress)
    assert progress[0].startswith("[1/6] quick-"), stderr
    assert " · ETA 0:" in progress[0]
    assert process.returncode == 130, stderr
    assert containers() == []
    report = read_json_report(report_path)
    assert report.interrupted
    assert [r.task_id for r in report.results] == ["quick-1", "quick-2"]
    assert report.not_run == ("slow-0", "slow-1", "slow-2", "slow-3")
    testsuite = ET.parse(junit_path).getroot().find("testsuite")
    assert testsuite is not None
    assert testsuite.get("skipped") == "4"
    assert ET.parse(junit_path).getroot().get("skipped") is None  # not in junit-10.xsd
    # The page says at once that the run was cut short: 2 of 6 passed is not 100 %.
    dom = dump_dom(page, tmp_path / "profile")
    banner = re.search(r'<p class="banner" id="interrupted">(.*?)</p>', dom)
    assert banner is not None, dom[:3000]
    assert banner.group(1) == (
        "Interrupted: 4 of 6 tasks did not run; the pass rate counts them as not passed."
    )
    assert "<title>slow · solver canonical · interrupted · sandcrew</title>" in dom
    tiles = dict(re.findall(r'data-count="([\w-]+)"><b>([^<]*)</b>', dom))
    assert tiles == {
        "total": "6", "pass": "2", "fail": "0", "error": "0", "timeout": "0", "not-run": "4",
        "rate": "33.3%",
    }  # fmt: skip
    assert "<small>of all 6 tasks; 100.0% of the 2 that ran</small>" in dom
