"""The README's runnable examples run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).parent.parent / "README.md"


def python_block_after(marker: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(marker)
    match = re.search(r"```python\n(.*?)```", text[start:], re.DOTALL)
    assert match is not None, f"no python block after {marker!r}"
    return match.group(1)


def test_two_agent_chat_example_runs() -> None:
    code = python_block_after("A two-agent chat against it")
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == [
        "student: What is 2 + 2?",
        "teacher: 2 + 2 is 4.",
        "student: Thanks!",
    ]
