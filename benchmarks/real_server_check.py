"""Checks what must hold in the runs of real_server.sh and prints one line per run.

Usage: python3 benchmarks/real_server_check.py RESULTS_DIR --budget N (exit 1 on a failure).

Every request the server refused must be a refusal of the conversation's turn structure that
the crew answered by switching form (a note in the transcript), at most one per solve, and
followed by an accepted request. Reviews must be made by the named call where the server
offers function calling (chatml-function-calling); elsewhere the plain-text review counts.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
from pathlib import Path
from typing import Any

from sandcrew.transcript import MessageEvent, read_transcript

ACCEPTED = re.compile(r'"POST /v1/chat/completions HTTP/1\.1" (\d{3})')
FORM_SWITCH = re.compile(r"refused the [a-z-]+ form of the conversation|sent it in the \S+ form")


def run_records(run: Path) -> list[dict[str, Any]]:
    """The transcript's records, and the result's own notes (a failed request's) as one more."""
    records = [json.loads(line) for line in run.with_suffix(".jsonl").read_text().splitlines()]
    try:
        summary = json.loads(run.with_suffix(".json").read_text())
    except ValueError:
        return records
    return [*records, {"notes": summary.get("notes") or []}]


def form_switches(records: list[dict[str, Any]]) -> list[str]:
    """The notes that say the crew sent the conversation in another chat form."""
    notes = [n for r in records for n in r.get("notes", []) if FORM_SWITCH.search(n)]
    # The result repeats the notes a failed request left in the transcript's stop record.
    return list(
        dict.fromkeys(
            note.split(": ", 1)[-1] if note.startswith("round ") else note for note in notes
        )
    )


def check_run(run: Path, budget: int, calls_required: bool) -> tuple[dict[str, Any], list[str]]:
    problems: list[str] = []
    rc = int(run.with_suffix(".rc").read_text().strip())
    stderr = run.with_suffix(".err").read_text()
    if "Traceback" in stderr:
        problems.append("traceback")
    if rc not in (0, 1):
        problems.append(f"exit {rc}")
    try:
        summary = json.loads(run.with_suffix(".json").read_text())
    except ValueError:
        return {"run": run.stem, "exit": rc}, [*problems, "no JSON result"]
    if not summary.get("stop_reason") or not summary.get("stop_detail"):
        problems.append("no stated stop reason")
    records = run_records(run)
    messages = [
        event.message
        for event in read_transcript(run.with_suffix(".jsonl"))
        if isinstance(event, MessageEvent)
    ]
    reviews = [message for message in messages if message.sender == "reviewer"]
    by_call = [
        message
        for message in reviews
        if isinstance(message.data, dict)
        and not any("without tools" in n or "rejected tool_choice" in n for n in message.notes)
    ]
    if calls_required and len(by_call) != len(reviews):
        problems.append(f"{len(reviews) - len(by_call)} review(s) not made by the named call")
    switches = form_switches(records)
    if len(switches) > 1:
        problems.append(f"the chat form was switched {len(switches)} times (at most once)")
    largest_prompt = max(
        (message.usage.prompt_tokens for message in messages if message.usage), default=0
    )
    if summary["total_tokens"] > budget + largest_prompt:
        problems.append(f"{summary['total_tokens']} tokens over the budget of {budget}")
    return {
        "run": run.stem,
        "exit": rc,
        "solved": summary["solved"],
        "stop": summary["stop_reason"],
        "rounds": summary["rounds"],
        "tokens": summary["total_tokens"],
        "estimated": summary.get("tokens_estimated"),
        "reviews": f"{len(by_call)}/{len(reviews)} by call",
        "form": switches[0][:120] if switches else "open form accepted",
        "detail": summary["stop_detail"][:160],
    }, problems


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("results", type=Path)
    parser.add_argument("--budget", type=int, required=True)
    options = parser.parse_args()
    failed = False
    for folder in sorted(path for path in options.results.iterdir() if path.is_dir()):
        statuses = ACCEPTED.findall((folder / "server.log").read_text())
        refused = [status for status in statuses if status != "200"]
        runs = [run.with_suffix("") for run in sorted(folder.glob("*.rc"))]
        refusals = sum(
            "refused the" in note for run in runs for note in form_switches(run_records(run))
        )
        twice = sum(1 for a, b in itertools.pairwise(statuses) if a != "200" and b != "200")
        print(
            f"## {folder.name}: {len(statuses)} requests, {len(refused)} refused "
            f"({refusals} answered by a change of chat form; {twice} refused twice in a row)"
        )
        failed |= len(refused) != refusals or twice > 0
        for run in runs:
            row, problems = check_run(run, options.budget, "function-calling" in folder.name)
            failed |= bool(problems)
            verdict = "ok" if not problems else "FAIL " + "; ".join(problems)
            print("  " + " | ".join(f"{key}={value}" for key, value in row.items()), "|", verdict)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
