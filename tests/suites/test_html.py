"""HTML suite reports opened in headless Chromium: counts, regressions, filters, escaping."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest

from sandcrew.suites import (
    SuiteReport,
    TaskResult,
    TaskStatus,
    read_json_report,
    write_json_report,
)
from tests.browser import dump_dom, screenshot
from tests.process import run_cli
from tests.suites.conftest import WriteFile

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("no_leftover_containers")]


# Markup a task prints: it must show as text and never run.
HOSTILE = (
    "<script>document.body.dataset.pwned = 'script'</script>"
    "<img src=x onerror=\"document.body.dataset.pwned = 'img'\"><b>bold</b>"
)

SUITE = """
- id: adds
  kind: code
  prompt: "def add(a, b):\\n"
  entry_point: add
  test: |
    def check(candidate):
        assert candidate(2, 3) == 5
- id: hostile
  kind: code
  prompt: "def add(a, b):\\n"
  entry_point: add
  test: |
    def check(candidate):
        assert candidate(2, 3) == 5
- id: slow
  kind: code
  prompt: "def add(a, b):\\n"
  entry_point: add
  test: |
    def check(candidate):
        assert candidate(2, 3) == 5
- id: fixed
  prompt: What is 2 + 2?
  expected: 4
"""

COMPLETIONS = {
    "adds": "    return a + b\n",
    "hostile": f"    raise ValueError({HOSTILE!r})\n",
    "slow": "    import time\n    time.sleep(3)\n    return a + b\n",
    "fixed": "4",
}


class _Dom(HTMLParser):
    """The parts of a dumped page the tests look at."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, str | None]] = []
        self.counts: dict[str, str] = {}
        self.body: dict[str, str | None] = {}
        self.title = ""
        self.text: list[str] = []
        self._count: str | None = None
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "tr" and "data-task" in attributes:
            self.rows.append(attributes)
        elif tag == "body":
            self.body = attributes
        elif tag == "title" and not self.title:  # the page's, not a chart bar's
            self._in_title = True
        elif tag == "div" and attributes.get("data-count"):
            self._count = attributes["data-count"]

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in_title:
            self.title += data
        if self._count is not None and data.strip():
            self.counts[self._count] = data.strip()
            self._count = None

    def visible_tasks(self) -> list[str | None]:
        return [row["data-task"] for row in self.rows if "hidden" not in row]


def open_page(page: Path, tmp_path: Path, view: str = "") -> _Dom:
    dom = _Dom()
    dom.feed(dump_dom(page, tmp_path / "profile", view))
    return dom


def _baseline(path: Path) -> Path:
    previous = SuiteReport(
        suite="hostile",
        source="hostile.yaml",
        solver="completions",
        executor="local",
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        duration=5.0,
        results=tuple(
            TaskResult(
                task_id=task_id,
                kind="code",
                status=TaskStatus.FAIL if task_id == "fixed" else TaskStatus.PASS,
                duration=1.0,
            )
            for task_id in COMPLETIONS
        ),
    )
    write_json_report(previous, path)
    return path


def test_suite_page_in_chromium(tmp_path: Path, write_file: WriteFile) -> None:
    suite = write_file("hostile.yaml", SUITE)
    completions = write_file(
        "completions.jsonl",
        "".join(json.dumps({"task_id": k, "completion": v}) + "\n" for k, v in COMPLETIONS.items()),
    )
    page, report = tmp_path / "report.html", tmp_path / "report.json"
    completed = run_cli(
        "suite", "run", str(suite), "-s", "completions", "--completions", str(completions),
        "-j", "2", "--baseline", str(_baseline(tmp_path / "base.json")),
        "--report", str(report), "--html", str(page),
    )  # fmt: skip
    assert completed.returncode == 1, completed.stderr  # one regression

    dom = open_page(page, tmp_path)
    assert dom.counts == {
        "total": "4",
        "pass": "3",
        "fail": "1",
        "error": "0",
        "timeout": "0",
        "rate": "75.0%",
    }
    # Regressions first, then fixes, each highlighted.
    assert [(row["data-task"], row.get("class")) for row in dom.rows[:2]] == [
        ("hostile", "regression"),
        ("fixed", "fix"),
    ]
    # The task's markup is text in the page: no element from it, no script run.
    assert "pwned" not in dom.body
    assert dom.title == "hostile · solver completions · sandcrew"
    assert any(HOSTILE in text for text in dom.text)

    failing = open_page(page, tmp_path, "status=fail")
    assert failing.visible_tasks() == ["hostile"]
    by_duration = open_page(page, tmp_path, "sort=duration")
    assert by_duration.visible_tasks()[0] == "slow"

    png = screenshot(page, tmp_path / "profile", tmp_path / "report.png")
    assert png.startswith(b"\x89PNG")

    # The same page from the saved JSON report.
    again = tmp_path / "again.html"
    rendered = run_cli("suite", "report", str(report), "--html", str(again))
    assert rendered.returncode == 0, rendered.stderr
    assert open_page(again, tmp_path).counts["fail"] == "1"


REPORTED_SUITE = """
- id: adds
  kind: code
  prompt: "def add(a, b):\\n"
  entry_point: add
  test: |
    def check(candidate):
        assert candidate(2, 3) == 5
- id: loops
  kind: code
  prompt: "def add(a, b):\\n"
  entry_point: add
  timeout: 1
  test: |
    def check(candidate):
        assert candidate(2, 3) == 5
- id: wrong
  prompt: What is 2 + 2?
  expected: 4
- id: raises
  kind: code
  prompt: "def add(a, b):\\n"
  entry_point: add
  test: |
    def check(candidate):
        assert candidate(2, 3) == 5
"""

REPORTED_COMPLETIONS = {
    "adds": "    return a + b\n",
    "loops": "    while True:\n        pass\n",
    "wrong": "5",
    "raises": "    raise ValueError('not today')\n",
}


def _row_html(dom: str, task: str) -> str:
    match = re.search(rf'<tr[^>]*data-task="{task}"[^>]*>(.*?)</tr>', dom, re.DOTALL)
    assert match is not None, f"no row for {task}"
    return match.group(1)


def _cells(row: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]


def test_a_page_says_what_ran_without_empty_columns_or_repeated_details(
    tmp_path: Path, write_file: WriteFile
) -> None:
    suite = write_file("reported.yaml", REPORTED_SUITE)
    completions = write_file(
        "completions.jsonl",
        "".join(
            json.dumps({"task_id": k, "completion": v}) + "\n"
            for k, v in REPORTED_COMPLETIONS.items()
        ),
    )
    before = {"adds": TaskStatus.FAIL, "loops": TaskStatus.TIMEOUT, "wrong": TaskStatus.PASS}
    write_json_report(
        SuiteReport(
            suite="reported",
            source="reported.yaml",
            solver="completions",
            executor="local",
            started_at=datetime(2026, 1, 1, tzinfo=UTC),
            duration=5.0,
            results=tuple(
                TaskResult(task_id=task, kind="code", status=status, duration=1.0)
                for task, status in {**before, "raises": TaskStatus.FAIL}.items()
            ),
        ),
        tmp_path / "base.json",
    )
    page, report = tmp_path / "report.html", tmp_path / "report.json"
    completed = run_cli(
        "suite", "run", str(suite), "-s", "completions", "--completions", str(completions),
        "-j", "2", "--baseline", str(tmp_path / "base.json"), "--report", str(report),
        "--html", str(page), env={"COLUMNS": "200"},
    )  # fmt: skip
    assert completed.returncode == 1, completed.stderr  # one regression

    # The loop timed out with another task running, then again alone: two container runs,
    # a confirmed timeout, wherever the run is reported.
    loops = read_json_report(report).result_for("loops")
    assert (loops.status, loops.confirmed, loops.container_runs) == (TaskStatus.TIMEOUT, True, 2)
    [table_row] = [line for line in completed.stdout.splitlines() if " loops " in line]
    assert re.search(r"loops\W+timeout, confirmed\W+[\d.]+s\W+2\W", table_row), table_row
    assert "confirming 1 timeout alone, one at a time (at most 0:00:01)" in completed.stderr

    dom = dump_dom(page, tmp_path / "profile")
    assert _cells(_row_html(dom, "loops"))[1:4:2] == ["timeout, confirmed", "2"]
    # No crew here: no rounds, tokens or stop reason columns to leave empty.
    header = dom[dom.index("<thead>") : dom.index("</thead>")]
    assert re.findall(r"<th[^>]*>([^<]*)</th>", header) == [
        "Task", "Status", "Duration", "Runs", "Detail",
    ]  # fmt: skip
    # A one-line detail is shown once; a traceback folds under its last line.
    wrong = _row_html(dom, "wrong")
    assert "<span class=\"detail\">expected the number 4, got '5'</span>" in wrong, wrong
    assert "<summary>expected" not in wrong
    assert "<summary>ValueError: not today</summary>" in _row_html(dom, "raises")
    assert '<h2 id="changes">1 regression and 1 fix since the baseline</h2>' in dom
    assert re.search(r"Started: <b>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</b>", dom), dom[:2000]
