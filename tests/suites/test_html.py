"""HTML suite reports opened in headless Chromium: counts, regressions, filters, escaping."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest

from sandcrew.suites import SuiteReport, TaskResult, TaskStatus, write_json_report
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
