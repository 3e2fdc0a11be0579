"""A suite report as one self-contained HTML page: summary, filterable table, chart.

The table filters by status and sorts by duration; the page's address can
carry a view (``report.html#status=fail,timeout&sort=duration``). The page
is self-contained (:mod:`sandcrew.html_page`). Task ids, details and every
other text from the run are untrusted (program output, model text): escaped.
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from pathlib import Path

from sandcrew.core import counted
from sandcrew.html_page import html_page, meta_line
from sandcrew.suites._baseline import BaselineComparison, StatusChange
from sandcrew.suites._errors import SuiteError
from sandcrew.suites._outcomes import TaskResult, TaskStatus
from sandcrew.suites._reports import SuiteReport

CHART_LIMIT = 60
"""The duration chart shows this many of the slowest tasks."""

_STYLE = """
.counts { display: flex; gap: .6rem; margin: 1rem 0; flex-wrap: wrap; }
.count { border: 1px solid #d1d9e0; border-radius: 6px; padding: .4rem .8rem; }
.count b { font-size: 1.2rem; display: block; }
.count small { display: block; color: #59636e; }
.banner { border: 2px solid #9a6700; background: #fff8c5; border-radius: 6px;
  padding: .5rem .8rem; font-weight: 600; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid #d1d9e0;
  vertical-align: top; }
th.sortable { cursor: pointer; text-decoration: underline dotted; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.status { font-weight: 600; }
tr.regression { background: #ffebe9; } tr.fix { background: #dafbe1; }
summary { cursor: pointer; }
.filters label { margin-right: 1rem; }
svg text { font: 11px system-ui, sans-serif; fill: #1f2328; }
"""

_SCRIPT = """
const rows = Array.from(document.querySelectorAll("#results tbody tr"));
function applyFilter() {
  const shown = new Set(Array.from(document.querySelectorAll(".filters input:checked"))
    .map((box) => box.value));
  let visible = 0;
  for (const row of rows) {
    const keep = shown.has(row.dataset.status);
    row.hidden = !keep;
    if (keep) visible += 1;
  }
  document.getElementById("visible-count").textContent = String(visible);
}
for (const box of document.querySelectorAll(".filters input")) {
  box.addEventListener("change", applyFilter);
}
let descending = true;
document.getElementById("sort-duration").addEventListener("click", () => {
  const body = document.querySelector("#results tbody");
  rows.sort((a, b) => (Number(a.dataset.duration) - Number(b.dataset.duration))
    * (descending ? -1 : 1));
  for (const row of rows) body.appendChild(row);
  document.getElementById("sort-duration").dataset.order = descending ? "desc" : "asc";
  descending = !descending;
});
// A link can carry a view: #status=fail,timeout&sort=duration
const wanted = new URLSearchParams(location.hash.slice(1));
if (wanted.has("status")) {
  const only = new Set(wanted.get("status").split(","));
  for (const box of document.querySelectorAll(".filters input")) {
    box.checked = only.has(box.value);
  }
}
if (wanted.get("sort") === "duration") document.getElementById("sort-duration").click();
applyFilter();
"""


def render_html_report(report: SuiteReport, comparison: BaselineComparison | None = None) -> str:
    """The page for ``report``; with ``comparison``, regressions and fixes come first."""
    title = f"{report.suite} · solver {report.solver}"
    heading = f"{title} · interrupted" if report.interrupted else title
    parts = [f"<h1>{escape(heading)}</h1>", _interruption(report), _meta(report), _counts(report)]
    if comparison is not None:
        parts.append(_changes(comparison))
    parts += [_table(report, comparison), _chart(report.results)]
    return html_page(f"{heading} · sandcrew", "\n".join(parts), style=_STYLE, script=_SCRIPT)


def write_html_report(
    report: SuiteReport, path: Path, comparison: BaselineComparison | None = None
) -> None:
    """Write the page for ``report`` to ``path``."""
    try:
        path.write_text(render_html_report(report, comparison), encoding="utf-8")
    except OSError as error:
        raise SuiteError(f"Cannot write HTML report {path}: {error}") from None


def _interruption(report: SuiteReport) -> str:
    """Where the eye lands first: an interrupted run did not check every task."""
    if not report.interrupted:
        return ""
    total = report.counts.total
    return (
        f'<p class="banner" id="interrupted">Interrupted: {len(report.not_run)} of '
        f"{counted(total, 'task')} did not run; the pass rate counts them as not passed.</p>"
    )


def _meta(report: SuiteReport) -> str:
    facts = [
        ("Source", report.source),
        ("Executor", report.executor),
        ("Model", report.model or "—"),
        ("Started", _moment(report.started_at)),
        ("Wall time", f"{report.duration:.1f}s"),
        ("sandcrew", report.sandcrew_version or "—"),
    ]
    return meta_line(facts)


def _moment(moment: datetime) -> str:
    """A report's start as people read it, in UTC (a page is read anywhere)."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _counts(report: SuiteReport) -> str:
    counts = report.counts
    boxes = [
        ("total", "Tasks", counts.total),
        ("pass", "Passed", counts.passed),
        ("fail", "Failed", counts.failed),
        ("error", "Errors", counts.errors),
        ("timeout", "Timeouts", counts.timeouts),
    ]
    if counts.not_run:
        boxes.append(("not-run", "Not run", counts.not_run))
    html = "".join(
        f'<div class="count {name}" data-count="{name}"><b>{value}</b>{label}</div>'
        for name, label, value in boxes
    )
    # Over every task of the run: a task that never ran did not pass.
    rate = f"{100 * counts.passed / counts.total:.1f}%" if counts.total else "—"
    finished = counts.total - counts.not_run
    note = ""
    if counts.not_run:
        of_finished = f"{100 * counts.passed / finished:.1f}%" if finished else "—"
        note = (
            f"<small>of all {counts.total} tasks; {of_finished} of the {finished} that ran</small>"
        )
    html += f'<div class="count" data-count="rate"><b>{rate}</b>Pass rate{note}</div>'
    return f'<div class="counts">{html}</div>'


def _changes(comparison: BaselineComparison) -> str:
    if not comparison.regressions and not comparison.fixes:
        return '<h2 id="changes">No regressions and no fixes since the baseline</h2>'
    items = [_change_item(change, "regression") for change in comparison.regressions]
    items += [_change_item(change, "fix") for change in comparison.fixes]
    regressions = counted(len(comparison.regressions), "regression")
    fixes = counted(len(comparison.fixes), "fix", "fixes")
    heading = f"{regressions} and {fixes} since the baseline"
    return f'<h2 id="changes">{heading}</h2><ul>{"".join(items)}</ul>'


def _change_item(change: StatusChange, kind: str) -> str:
    return (
        f'<li class="{kind}"><b>{escape(change.task_id)}</b>: '
        f"{escape(change.before.value)} → {escape(change.after.value)}</li>"
    )


def _table(report: SuiteReport, comparison: BaselineComparison | None) -> str:
    changed: dict[str, str] = {}
    if comparison is not None:
        changed.update((change.task_id, "regression") for change in comparison.regressions)
        changed.update((change.task_id, "fix") for change in comparison.fixes)
    # Regressions first, then fixes, then the rest in suite order.
    order = {"regression": 0, "fix": 1}
    results = sorted(
        report.results, key=lambda result: order.get(changed.get(result.task_id, ""), 2)
    )
    filters = "".join(
        f'<label><input type="checkbox" value="{status.value}" checked> {status.value}</label>'
        for status in TaskStatus
    )
    # Rounds, tokens and stop reason belong to the crew solver; other solvers have none.
    crew_columns = any(result.crew is not None for result in report.results)
    crew_headers = (
        '<th class="num">Rounds</th><th class="num">Tokens</th><th>Stop reason</th>'
        if crew_columns
        else ""
    )
    rows = "".join(
        _row(result, changed.get(result.task_id), crew_columns=crew_columns) for result in results
    )
    return (
        f'<h2>Tasks (<span id="visible-count">{len(results)}</span> shown)</h2>'
        f'<p class="filters">{filters}</p>'
        '<table id="results"><thead><tr><th>Task</th><th>Status</th>'
        '<th class="num sortable" id="sort-duration">Duration</th><th class="num">Runs</th>'
        f"{crew_headers}<th>Detail</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _row(result: TaskResult, change: str | None, *, crew_columns: bool) -> str:
    status = result.status.value
    row_class = f' class="{change}"' if change else ""
    cells = [
        ("", escape(result.task_id)),
        ("", f'<span class="status {status}">{escape(result.verdict)}</span>'),
        ("num", f"{result.duration:.2f}s"),
        ("num", str(result.container_runs)),
    ]
    if crew_columns:
        rounds, tokens, stop_reason = result.crew_cells()
        cells += [("num", escape(rounds)), ("num", escape(tokens)), ("", escape(stop_reason))]
    cells.append(("", _detail(result)))
    tds = "".join(
        f'<td class="{css}">{cell}</td>' if css else f"<td>{cell}</td>" for css, cell in cells
    )
    return (
        f'<tr{row_class} data-task="{escape(result.task_id)}" data-status="{status}" '
        f'data-duration="{result.duration:.6f}">{tds}</tr>'
    )


SUMMARY_CHARS = 160
"""A detail's summary line is cut to this many characters."""


def _detail(result: TaskResult) -> str:
    """The detail (a one-line one as it is; a longer one folded under its last line) and
    the output, folded."""
    html = ""
    lines = [line for line in result.detail.strip().splitlines() if line.strip()]
    if len(lines) == 1 and len(lines[0]) <= SUMMARY_CHARS:
        html = f'<span class="detail">{escape(lines[0])}</span>'
    elif lines:
        html = (
            f"<details><summary>{escape(lines[-1][:SUMMARY_CHARS])}</summary>"
            f"<pre>{escape(result.detail)}</pre></details>"
        )
    if result.output:
        html += (
            '<details class="output"><summary>output</summary>'
            f"<pre>{escape(result.output)}</pre></details>"
        )
    return html


def _chart(results: tuple[TaskResult, ...]) -> str:
    slowest = sorted(results, key=lambda result: result.duration, reverse=True)[:CHART_LIMIT]
    if not slowest:
        return ""
    longest = max(result.duration for result in slowest) or 1.0
    bar_height, label_width, width = 16, 220, 760
    bars = []
    for index, result in enumerate(slowest):
        y = index * bar_height
        length = max(1.0, (width - label_width - 60) * result.duration / longest)
        name = escape(result.task_id if len(result.task_id) <= 32 else result.task_id[:31] + "…")
        bars.append(
            f'<g class="bar" data-task="{escape(result.task_id)}">'
            f"<title>{escape(result.task_id)}: {result.duration:.2f}s</title>"
            f'<text x="0" y="{y + 12}">{name}</text>'
            f'<rect x="{label_width}" y="{y + 2}" width="{length:.1f}" height="{bar_height - 4}" '
            f'class="{result.status.value}" fill="currentColor"></rect>'
            f'<text x="{label_width + length + 4:.1f}" y="{y + 12}">{result.duration:.2f}s</text>'
            "</g>"
        )
    shown = "" if len(results) <= CHART_LIMIT else f" (the {CHART_LIMIT} slowest)"
    height = bar_height * len(slowest)
    return (
        f"<h2>Durations{shown}</h2>"
        f'<svg id="durations" width="{width}" height="{height}" role="img" '
        f'aria-label="Task durations">{"".join(bars)}</svg>'
    )
