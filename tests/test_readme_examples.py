"""The README's runnable examples run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.docker
def test_files_and_plots_example_runs(tmp_path: Path) -> None:
    # The image build line is CI's business (.ci/run builds python-data); the rest runs as is.
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Files and plots") :]
    match = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert match is not None
    script = "\n".join(
        line for line in match.group(1).splitlines() if not line.startswith("sandcrew images")
    )
    completed = subprocess.run(
        ["bash", "-euc", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["mean", "14.0", "max", "24.0"]
    assert (tmp_path / "results" / "figure-1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "saved to results/figure-1.png" in completed.stderr


def quick_start_lines() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Quick start") :]
    match = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert match is not None
    return match.group(1).splitlines()


@pytest.mark.docker
def test_quick_start_first_command_works_with_no_model() -> None:
    setup, first, needs_model, *_ = quick_start_lines()
    assert "sandcrew images build --install-deps" in setup
    assert "sandcrew solve" in needs_model  # the command that needs a model comes after
    # The test environment has no model configured (no key, a closed base URL).
    assert not os.environ.get("OPENAI_API_KEY")
    completed = subprocess.run(
        ["bash", "-euc", first],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    assert completed.returncode == 0, completed.stderr
    assert "14 tasks: 14 passed, 0 failed, 0 errors, 0 timeouts" in completed.stdout
