"""`suite run --junit` through the real CLI: the file validates against junit-10.xsd and
carries each task's output, in agreement with the JSON and HTML reports."""

from __future__ import annotations

import html
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from sandcrew.suites import read_json_report
from tests.process import run_cli
from tests.suites.conftest import WriteFile

SCHEMA = Path(__file__).parent / "schemas" / "junit-10.xsd"

# One task of each status, each printing something of its own (and a control character
# XML 1.0 cannot carry, which must not break the file).
SUITE = r"""
- id: prints-and-passes
  prompt: "2 + 2?"
  expected: 4
  solution: "import sys; print('the sum is 4'); print('a note on stderr', file=sys.stderr)"
- id: code-passes
  kind: code
  prompt: "def add(a, b):\n"
  entry_point: add
  canonical_solution: "    print('adding', a, b)\n    return a + b\n"
  test: |
    def check(candidate):
        assert candidate(2, 3) == 5
- id: code-fails
  kind: code
  prompt: "def add(a, b):\n"
  entry_point: add
  canonical_solution: "    print('bell \x07 then a wrong sum')\n    return a - b\n"
  test: |
    def check(candidate):
        assert candidate(2, 3) == 5, 'add(2, 3) is not 5'
- id: no-solution
  prompt: "3 + 3?"
  expected: 6
- id: sleeps
  prompt: "1?"
  expected: 1
  timeout: 1
  solution: "import time; print('started', flush=True); time.sleep(30)"
"""


@pytest.mark.docker
def test_junit_validates_against_junit_10_xsd_and_carries_each_output(
    tmp_path: Path, write_file: WriteFile
) -> None:
    suite = write_file("mixed.yaml", SUITE)
    report_path, junit_path, page_path = (tmp_path / name for name in ("r.json", "r.xml", "r.html"))

    completed = run_cli(
        "suite", "run", str(suite), "-s", "canonical", "-j", "3",
        "--report", str(report_path), "--junit", str(junit_path), "--html", str(page_path),
    )  # fmt: skip

    assert completed.returncode == 1, completed.stderr
    report = read_json_report(report_path)
    assert {r.task_id: r.status.value for r in report.results} == {
        "prints-and-passes": "pass",
        "code-passes": "pass",
        "code-fails": "fail",
        "no-solution": "error",
        "sleeps": "timeout",
    }
    xmlschema.XMLSchema(SCHEMA).validate(junit_path)

    outputs = {r.task_id: r.output for r in report.results}
    assert outputs["prints-and-passes"] == "the sum is 4\na note on stderr\n"
    assert outputs["code-passes"] == "adding 2 3\n"  # the harness's pass token is not output
    assert outputs["code-fails"].startswith("bell \x07 then a wrong sum\n")
    assert "AssertionError: add(2, 3) is not 5" in outputs["code-fails"]
    assert outputs["sleeps"] == "started\n"
    assert outputs["no-solution"] == ""

    cases = {case.get("name"): case for case in ET.parse(junit_path).iter("testcase")}
    system_out = {name: case.findtext("system-out") for name, case in cases.items()}
    assert system_out == {
        "prints-and-passes": outputs["prints-and-passes"],
        "code-passes": outputs["code-passes"],
        "code-fails": outputs["code-fails"].replace("\x07", "\ufffd"),
        "no-solution": None,
        "sleeps": outputs["sleeps"],
    }
    assert cases["sleeps"].find("failure") is not None
    assert cases["no-solution"].find("error") is not None

    page = html.unescape(page_path.read_text(encoding="utf-8"))
    for task_id in ("prints-and-passes", "code-passes", "code-fails", "sleeps"):
        assert outputs[task_id] in page, task_id


def test_an_invalid_junit_file_fails_the_schema(tmp_path: Path) -> None:
    # The schema is strict enough to catch what the writer avoids: `skipped` on <testsuites>.
    path = tmp_path / "bad.xml"
    path.write_text(
        '<testsuites skipped="1"><testsuite name="s" tests="0" failures="0" errors="0"/>'
        "</testsuites>",
        encoding="utf-8",
    )
    with pytest.raises(xmlschema.XMLSchemaValidationError, match="skipped"):
        xmlschema.XMLSchema(SCHEMA).validate(path)
