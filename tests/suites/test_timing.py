"""Evaluation-grade timing on real Docker: limits relative to the reference solution, and a
timeout confirmed alone before it counts (docs/scale.md's example, run as written)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sandcrew.cli import app
from sandcrew.suites import RelativeTimeLimit, SuiteError, load_suite

pytestmark = pytest.mark.docker

SCALE_DOC = Path(__file__).parents[2] / "docs" / "scale.md"


def _doc_command(option: str) -> list[str]:
    """The docs' one-line command that uses ``option``, as argv after ``sandcrew``."""
    blocks = re.findall(r"```bash\n(.*?)```", SCALE_DOC.read_text(encoding="utf-8"), re.DOTALL)
    [line] = [line for block in blocks for line in block.splitlines() if option in line]
    argv = shlex.split(line)
    assert argv[0] == "sandcrew"
    return argv[1:]


def test_the_docs_relative_limit_times_out_what_the_fixed_limit_lets_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    right = load_suite("humaneval").task("HumanEval/0").canonical_solution or ""
    # Right, but slow: about 5.6 s in all over the check's seven calls.
    slow = "    import time\n    time.sleep(0.8)\n" + right
    samples = tmp_path / "samples.jsonl"
    samples.write_text(
        "".join(
            json.dumps({"task_id": "HumanEval/0", "completion": completion}) + "\n"
            for completion in (right, slow)
        ),
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    argv = [*_doc_command("--time-factor"), "--ignore-incomplete", "--k", "1"]
    assert argv[:3] == ["suite", "evaluate", "samples.jsonl"]

    relative = CliRunner().invoke(app, argv)
    relative_lines = _results(samples)
    fixed = CliRunner().invoke(app, [*argv[:3], "--isolation", "batch", "--timeout", "10",
                                     "--ignore-incomplete", "--k", "1"])  # fmt: skip
    fixed_lines = _results(samples)

    assert relative.exit_code == 0, relative.output
    assert fixed.exit_code == 0, fixed.output
    # The reference check takes a fraction of a second: its limit is a second or two.
    assert [(line["result"], line.get("confirmed")) for line in relative_lines] == [
        ("passed", None),
        ("timed out", True),
    ]
    [retry] = relative_lines[1]["retries"]  # type: ignore[misc]
    limit = float(re.match(r"timed out after ([\d.]+)s with others running; run again alone$",
                           str(retry)).group(1))  # type: ignore[union-attr]  # fmt: skip
    assert 1.0 <= limit < 5.6
    assert "(1 confirmed alone)" in relative.output
    assert [line["result"] for line in fixed_lines] == ["passed", "passed"]


def _results(samples: Path) -> list[dict[str, object]]:
    text = samples.with_name(samples.name + "_results.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def test_relative_limit_is_the_larger_of_floor_and_scaled_reference() -> None:
    assert RelativeTimeLimit(4.0, 1.0).limit(0.1) == 1.0
    assert RelativeTimeLimit(4.0, 1.0).limit(0.5) == 2.0
    with pytest.raises(SuiteError, match="factor > 0 and floor > 0"):
        RelativeTimeLimit(0.0, 1.0)
