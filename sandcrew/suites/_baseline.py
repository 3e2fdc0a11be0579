"""Comparing a run with a previous report: regressions and fixes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from sandcrew.suites._outcomes import TaskStatus
from sandcrew.suites._reports import SuiteReport


class StatusChange(BaseModel):
    """One task whose verdict flipped between the baseline and this run."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    before: TaskStatus
    after: TaskStatus
    detail: str = ""
    """This run's detail (why it fails now, for a regression)."""


class BaselineComparison(BaseModel):
    """What changed since the baseline report."""

    model_config = ConfigDict(frozen=True)

    regressions: tuple[StatusChange, ...]
    """Passed in the baseline, does not pass now."""
    fixes: tuple[StatusChange, ...]
    """Did not pass in the baseline, passes now."""
    still_failing: tuple[str, ...]
    """Did not pass in either run."""
    new_tasks: tuple[str, ...]
    """Ran now, absent from the baseline."""
    missing_tasks: tuple[str, ...]
    """In the baseline, not run now (filtered out, removed, or interrupted)."""

    @property
    def has_regressions(self) -> bool:
        return bool(self.regressions)


def compare_with_baseline(report: SuiteReport, baseline: SuiteReport) -> BaselineComparison:
    """Regressions (passed before, not now) and fixes (the reverse) of ``report``."""
    before = {result.task_id: result for result in baseline.results}
    regressions: list[StatusChange] = []
    fixes: list[StatusChange] = []
    still_failing: list[str] = []
    new_tasks: list[str] = []
    for result in report.results:
        previous = before.get(result.task_id)
        if previous is None:
            new_tasks.append(result.task_id)
        elif previous.passed and not result.passed:
            regressions.append(
                StatusChange(
                    task_id=result.task_id,
                    before=previous.status,
                    after=result.status,
                    detail=result.detail,
                )
            )
        elif not previous.passed and result.passed:
            fixes.append(
                StatusChange(task_id=result.task_id, before=previous.status, after=result.status)
            )
        elif not result.passed:
            still_failing.append(result.task_id)
    ran = {result.task_id for result in report.results}
    missing = tuple(task_id for task_id in before if task_id not in ran)
    return BaselineComparison(
        regressions=tuple(regressions),
        fixes=tuple(fixes),
        still_failing=tuple(still_failing),
        new_tasks=tuple(new_tasks),
        missing_tasks=missing,
    )


def baseline_differences(
    baseline: SuiteReport, *, model: str | None, sandcrew_version: str | None
) -> list[str]:
    """What differs between the baseline's run and this one beyond the tasks themselves.

    Each item names the baseline's value and this run's, e.g. ``model 'a' (now 'b')``.
    A value the baseline does not record is not a difference.
    """
    differences = []
    if baseline.model is not None and baseline.model != model:
        now = repr(model) if model is not None else "no model"
        differences.append(f"model {baseline.model!r} (now {now})")
    if baseline.sandcrew_version is not None and baseline.sandcrew_version != sandcrew_version:
        differences.append(
            f"sandcrew {baseline.sandcrew_version} (now {sandcrew_version or 'unknown'})"
        )
    return differences
