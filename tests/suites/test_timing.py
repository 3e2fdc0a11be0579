"""Evaluation-grade timing on real Docker: limits relative to the reference solution, and a
timeout confirmed alone before it counts (docs/scale.md's example, run as written)."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sandcrew.cli import app
from sandcrew.suites import LocalExecutor, RelativeTimeLimit, SuiteError, evaluate_samples

pytestmark = pytest.mark.docker

SCALE_DOC = Path(__file__).parents[2] / "docs" / "scale.md"


def _doc_command(option: str) -> list[str]:
    """The docs' one-line command that uses ``option``, as argv after ``sandcrew``."""
    blocks = re.findall(r"```bash\n(.*?)```", SCALE_DOC.read_text(encoding="utf-8"), re.DOTALL)
    [line] = [line for block in blocks for line in block.splitlines() if option in line]
    argv = shlex.split(line)
    assert argv[0] == "sandcrew"
    return argv[1:]


PROBLEMS = """
- id: nap/0
  kind: code
  prompt: "def nap(seconds):\\n"
  entry_point: nap
  test: "def check(candidate):\\n    assert candidate(0) == 'rested'\\n"
  canonical_solution: "    import time\\n    time.sleep(seconds)\\n    return 'rested'\\n"
  reference_time: 0.1
- id: nap/1
  kind: code
  prompt: "def nap():\\n"
  entry_point: nap
  test: "def check(candidate):\\n    assert candidate() == 'rested'\\n"
  canonical_solution: "    import time\\n    time.sleep(1.0)\\n    return 'rested'\\n"
"""
NAP = "    import time\n    time.sleep({seconds})\n    return 'rested'\n"


def _write_samples(path: Path, samples: list[tuple[str, str]]) -> Path:
    path.write_text(
        "".join(json.dumps({"task_id": task_id, "completion": text}) + "\n"
                for task_id, text in samples),
        encoding="utf-8",
    )  # fmt: skip
    return path


def test_the_docs_relative_limit_times_out_what_the_fixed_limit_lets_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "problems.yaml").write_text(PROBLEMS, encoding="utf-8")
    samples = _write_samples(
        tmp_path / "samples.jsonl",
        [("nap/0", NAP.format(seconds=0)), ("nap/0", NAP.format(seconds=3))],
    )
    monkeypatch.chdir(tmp_path)
    argv = [*_doc_command("--time-factor"), "--problems", "problems.yaml",
            "--ignore-incomplete", "--k", "1"]  # fmt: skip
    assert argv[:3] == ["suite", "evaluate", "samples.jsonl"]

    relative = CliRunner().invoke(app, argv)
    relative_lines = _results(samples)
    fixed = CliRunner().invoke(app, [*argv[:3], "--isolation", "batch", "--timeout", "10",
                                     "--problems", "problems.yaml", "--ignore-incomplete",
                                     "--k", "1"])  # fmt: skip
    fixed_lines = _results(samples)

    assert relative.exit_code == 0, relative.output
    assert fixed.exit_code == 0, fixed.output
    # nap/0 carries its reference time (0.1 s): max(1, 4 × 0.1) = 1 s.
    assert [(line["result"], line.get("confirmed")) for line in relative_lines] == [
        ("passed", None),
        ("timed out", True),
    ]
    assert relative_lines[1]["retries"] == [
        "timed out after 1s with others running; run again alone"
    ]
    assert "(1 confirmed alone)" in relative.output
    assert [line["result"] for line in fixed_lines] == ["passed", "passed"]


def test_a_reference_time_not_given_is_measured_from_the_canonical_solution(
    tmp_path: Path,
) -> None:
    problems = tmp_path / "problems.yaml"
    problems.write_text(PROBLEMS, encoding="utf-8")
    # nap/1's canonical solution sleeps 1 s: its limit is 1.5 × (1 s and the run's cost).
    samples = _write_samples(
        tmp_path / "samples.jsonl",
        [("nap/1", NAP.format(seconds=1.0)), ("nap/1", NAP.format(seconds=12))],
    )
    evaluation = asyncio.run(
        evaluate_samples(
            samples,
            problems_path=problems,
            ks=(1,),
            check_timeout=30.0,
            relative_limit=RelativeTimeLimit(factor=1.5, floor=0.5),
            ignore_incomplete=True,
            executor=LocalExecutor("batch"),
        )
    )

    lines = _results(samples)
    assert [(line["result"], line.get("confirmed")) for line in lines] == [
        ("passed", None),
        ("timed out", True),
    ]
    [retry] = lines[1]["retries"]  # type: ignore[misc]
    limit = float(str(retry).split("timed out after ")[1].split("s ")[0])
    assert 1.5 <= limit < 12
    assert evaluation.confirmed_timeouts == 1


def _results(samples: Path) -> list[dict[str, object]]:
    text = samples.with_name(samples.name + "_results.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def test_relative_limit_is_the_larger_of_floor_and_scaled_reference() -> None:
    assert RelativeTimeLimit(4.0, 1.0).limit(0.1) == 1.0
    assert RelativeTimeLimit(4.0, 1.0).limit(0.5) == 2.0
    with pytest.raises(SuiteError, match="factor > 0 and floor > 0"):
        RelativeTimeLimit(0.0, 1.0)
