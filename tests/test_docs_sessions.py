"""The live-output, AutoGen-session and AG2-session examples of docs/ run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).parent.parent / "docs"


def python_blocks(page: str, heading: str) -> list[str]:
    text = (DOCS / page).read_text(encoding="utf-8")
    section = text[text.index(f"\n## {heading}\n") :]
    following = section.find("\n## ", 1)
    section = section if following < 0 else section[:following]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def run_python(code: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


@pytest.mark.docker
def test_live_output_examples_run(docker_client: object) -> None:
    streamed, called_back = python_blocks("sessions.md", "Live output")
    assert run_python(streamed) == "step 0\nstep 1\nstep 2\nexit 0\n"
    assert run_python(called_back) == "hello\n0\n"


@pytest.mark.docker
def test_the_autogen_session_example_keeps_its_variable(docker_client: object) -> None:
    (example,) = python_blocks("mcp-and-frameworks.md", "AutoGen: a stateful executor")
    assert run_python(example) == "0 42\n"


def test_the_ag2_session_example_builds_the_tool() -> None:
    (example,) = python_blocks("mcp-and-frameworks.md", "AG2: a persistent sandbox")
    assert run_python(example) == ""
