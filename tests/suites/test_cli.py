"""`sandcrew suite run|list` end to end, on real Docker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sandcrew.cli import app
from sandcrew.suites import load_suite, read_json_report

SANDCREW = Path(sys.executable).with_name("sandcrew")
WriteFile = Callable[[str, str], Path]


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
def test_humaneval_canonical_passes_all_164_in_containers(tmp_path: Path) -> None:
    report_path = tmp_path / "humaneval.json"
    cores = str(os.cpu_count())
    result = invoke(
        "run", "humaneval", "--solver", "canonical", "-j", cores, "--report", str(report_path)
    )
    assert result.exit_code == 0, result.output
    assert "164 tasks: 164 passed, 0 failed, 0 errors, 0 timeouts" in result.output
    report = read_json_report(report_path)
    assert report.counts.passed == 164
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
    assert "10 tasks: 6 passed, 2 failed, 1 errors, 1 timeouts" in result.output
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
    assert "1 regressions" in second.output
    assert "capital: pass → fail" in second.output
    assert "expected exactly 'Paris', got 'Lyon'" in second.output
    assert "1 fixes" in second.output
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
        "Unknown solver 'oracle'; choose one of: canonical, completions, crew",
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
        ["basics", "-s", "canonical", "--executor", "ray", "--isolation", "batch"],
        "--isolation batch only applies to --executor local",
        id="batch-on-ray",
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


@pytest.mark.parametrize(("args", "message"), USAGE_ERRORS)
def test_usage_errors_exit_2_with_one_clear_line(args: list[str], message: str) -> None:
    completed = sandcrew("suite", "run", *args)
    assert completed.returncode == 2, completed.stderr
    assert message in " ".join(completed.stderr.split())
    assert "Traceback" not in completed.stderr


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
    process = subprocess.Popen(
        [str(SANDCREW), "suite", "run", str(suite), "-s", "canonical", "-j", "2",
         "--report", str(report_path), "--junit", str(junit_path)],
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

    try:
        deadline = time.monotonic() + 60
        # Two slow programs running means both quick tasks are done (concurrency 2).
        # A quick task's container lives well under a second; a slow one's for 60 s:
        # only containers seen for 1.5 s count, so the quick ones are never mistaken.
        first_seen: dict[str, float] = {}
        while True:
            now = time.monotonic()
            first_seen = {name: first_seen.get(name, now) for name in containers()}
            if sum(now - seen >= 1.5 for seen in first_seen.values()) >= 2:
                break
            assert process.poll() is None, process.communicate()
            assert now < deadline, "the slow tasks never started"
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert containers() == []
    report = read_json_report(report_path)
    assert report.interrupted
    assert [r.task_id for r in report.results] == ["quick-1", "quick-2"]
    assert report.not_run == ("slow-0", "slow-1", "slow-2", "slow-3")
    testsuite = ET.parse(junit_path).getroot().find("testsuite")
    assert testsuite is not None
    assert testsuite.get("skipped") == "4"
