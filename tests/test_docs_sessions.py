"""The examples of docs/sessions.md run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SESSIONS = Path(__file__).parent.parent / "docs" / "sessions.md"


def python_blocks(heading: str) -> list[str]:
    text = SESSIONS.read_text(encoding="utf-8")
    section = text[text.index(f"\n## {heading}\n") :]
    following = section.find("\n## ", 1)
    section = section if following < 0 else section[:following]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


@pytest.mark.docker
def test_live_output_examples_run(docker_client: object) -> None:
    streamed, called_back = python_blocks("Live output")
    outputs = []
    for code in (streamed, called_back):
        completed = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
        assert completed.returncode == 0, completed.stderr
        outputs.append(completed.stdout)
    assert outputs == ["step 0\nstep 1\nstep 2\nexit 0\n", "hello\n0\n"]
