"""The report of one suite run, and its JSON and JUnit XML files."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, computed_field

from sandcrew.core import summarize_problem
from sandcrew.suites._errors import SuiteError
from sandcrew.suites._outcomes import TaskResult, TaskStatus

REPORT_FORMAT = 1
_XML_INVALID = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class StatusCounts(BaseModel):
    """How many tasks ended in each status."""

    model_config = ConfigDict(frozen=True)

    total: int
    passed: int
    failed: int
    errors: int
    timeouts: int
    not_run: int

    @classmethod
    def of(cls, results: Iterable[TaskResult], *, not_run: int = 0) -> StatusCounts:
        statuses = [result.status for result in results]
        return cls(
            total=len(statuses) + not_run,
            passed=statuses.count(TaskStatus.PASS),
            failed=statuses.count(TaskStatus.FAIL),
            errors=statuses.count(TaskStatus.ERROR),
            timeouts=statuses.count(TaskStatus.TIMEOUT),
            not_run=not_run,
        )


class SuiteReport(BaseModel):
    """Everything a suite run found; written with :func:`write_json_report`."""

    model_config = ConfigDict(frozen=True)

    format: int = REPORT_FORMAT
    suite: str
    source: str
    solver: str
    executor: str
    started_at: datetime
    duration: float
    """Wall-clock seconds of the whole run."""
    interrupted: bool = False
    """The run was stopped (Ctrl-C) before every task finished."""
    not_run: tuple[str, ...] = ()
    """Ids of tasks that did not finish because the run was interrupted."""
    results: tuple[TaskResult, ...]
    """Finished tasks, in suite order."""
    model: str | None = None
    """The model the crew solver used (``None`` for the other solvers)."""
    sandcrew_version: str | None = None
    """The sandcrew that ran the suite."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def counts(self) -> StatusCounts:
        return StatusCounts.of(self.results, not_run=len(self.not_run))

    @property
    def all_passed(self) -> bool:
        return not self.not_run and all(result.passed for result in self.results)

    def result_for(self, task_id: str) -> TaskResult:
        """The result of task ``task_id``; ``KeyError`` when it did not finish."""
        for result in self.results:
            if result.task_id == task_id:
                return result
        raise KeyError(task_id)


def write_json_report(report: SuiteReport, path: Path) -> None:
    """Write ``report`` as indented JSON (readable again with :func:`read_json_report`)."""
    try:
        path.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    except OSError as error:
        raise SuiteError(f"Cannot write report {path}: {error}") from None


def read_json_report(path: Path) -> SuiteReport:
    """Read a report written by ``--report``; a bad file is a :class:`SuiteError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SuiteError(f"Cannot read report {path}: {error}") from None
    try:
        return SuiteReport.model_validate_json(text)
    except ValidationError as error:
        raise SuiteError(
            f"{path} is not a sandcrew suite report (from `sandcrew suite run --report`): "
            + summarize_problem(error.errors()[0], whole="file")
        ) from None


def write_junit(report: SuiteReport, path: Path) -> None:
    """Write ``report`` as JUnit XML: one ``testsuite``, one ``testcase`` per task.

    ``fail`` and ``timeout`` are ``failure`` elements, ``error`` is an ``error``
    element, tasks left unfinished by an interruption are ``skipped``; each task's
    output is its ``system-out``. The file validates against the common junit-10.xsd.
    """
    counts = report.counts
    attributes = {
        "name": report.suite,
        "tests": str(counts.total),
        "failures": str(counts.failed + counts.timeouts),
        "errors": str(counts.errors),
        "skipped": str(counts.not_run),
        "time": f"{report.duration:.3f}",
    }
    # junit-10.xsd allows no `skipped` on <testsuites>, only on <testsuite>.
    root = ET.Element("testsuites", {k: v for k, v in attributes.items() if k != "skipped"})
    suite = ET.SubElement(
        root, "testsuite", {**attributes, "timestamp": report.started_at.isoformat()}
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (("solver", report.solver), ("executor", report.executor)):
        ET.SubElement(properties, "property", {"name": name, "value": value})
    for result in report.results:
        case = ET.SubElement(
            suite,
            "testcase",
            {"classname": report.suite, "name": result.task_id, "time": f"{result.duration:.3f}"},
        )
        if result.status is TaskStatus.FAIL or result.status is TaskStatus.TIMEOUT:
            failure = ET.SubElement(
                case, "failure", {"message": _summary_line(result.detail), "type": result.status}
            )
            failure.text = _xml_safe(result.detail)
        elif result.status is TaskStatus.ERROR:
            error = ET.SubElement(
                case, "error", {"message": _summary_line(result.detail), "type": "error"}
            )
            error.text = _xml_safe(result.detail)
        if result.output:
            ET.SubElement(case, "system-out").text = _xml_safe(result.output)
    for task_id in report.not_run:
        case = ET.SubElement(suite, "testcase", {"classname": report.suite, "name": task_id})
        ET.SubElement(case, "skipped", {"message": "not run: the suite run was interrupted"})
    ET.indent(root)
    try:
        ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    except OSError as error:
        raise SuiteError(f"Cannot write JUnit report {path}: {error}") from None


def _summary_line(text: str) -> str:
    # The last non-blank line: for a traceback, the exception itself.
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return _xml_safe(lines[-1][:200]) if lines else ""


def _xml_safe(text: str) -> str:
    # Program output may hold control characters that XML 1.0 cannot carry.
    return _XML_INVALID.sub("\ufffd", text)
