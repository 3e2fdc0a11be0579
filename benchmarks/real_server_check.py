"""Checks what must hold in the runs of real_server.sh and prints one line per run.

Usage: python3 benchmarks/real_server_check.py RESULTS_DIR --budget N (exit 1 on a failure).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from sandcrew.transcript import MessageEvent, read_transcript

ACCEPTED = re.compile(r'"POST /v1/chat/completions HTTP/1\.1" (\d{3})')


def check_run(run: Path, budget: int) -> tuple[dict[str, Any], list[str]]:
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
    if len(by_call) != len(reviews):
        problems.append(f"{len(reviews) - len(by_call)} review(s) not made by the named call")
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
        "detail": summary["stop_detail"][:90],
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
        print(f"## {folder.name}: {len(statuses)} requests, {len(refused)} not accepted")
        failed |= bool(refused)
        for run in sorted(folder.glob("*.rc")):
            row, problems = check_run(run.with_suffix(""), options.budget)
            failed |= bool(problems)
            verdict = "ok" if not problems else "FAIL " + "; ".join(problems)
            print("  " + " | ".join(f"{key}={value}" for key, value in row.items()), "|", verdict)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
