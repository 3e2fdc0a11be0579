"""The crew solver end to end: the real crew, the scripted model over HTTP, real containers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import sandcrew
from sandcrew.agents import ModelEndpoint, StopReason
from sandcrew.crew import CrewResult, CrewSettings
from sandcrew.suites import AnswerTask, CodeTask, CrewSolver, TaskStatus, load_suite, run_suite
from sandcrew.testing import ALL_CHECKS_PASS, ScriptedModelServer, ScriptedToolCall, Turn
from tests.process import run_cli


def _conversation_about(text: str) -> Any:
    def matches(body: dict[str, Any]) -> bool:
        return text in json.dumps(body)

    return matches


def crew_turns(task_prompt: str, code: str) -> list[Turn]:
    """One task solved on the happy path: coder writes ``code``, reviewer approves, admin ends.

    Turns are matched by the task they belong to, so tasks may run concurrently.
    """
    about_task = _conversation_about(json.dumps(task_prompt)[1:-1])
    return [
        Turn(agent="coder", when=about_task, content=f"```python\n{code}```"),
        Turn(
            agent="reviewer",
            when=about_task,
            tool_calls=[ScriptedToolCall(name="review_code_block", arguments=ALL_CHECKS_PASS)],
        ),
        # The admin ends with the bare signal: the answer is then the run's output.
        Turn(agent="admin", when=about_task, content="[COMPLETE]"),
    ]


@pytest.mark.docker
async def test_basics_suite_passes_with_the_crew_solver(
    scripted_model_server: ScriptedModelServer,
) -> None:
    suite = load_suite("basics")
    for task in suite.tasks:
        assert isinstance(task, AnswerTask)
        assert task.solution is not None
        scripted_model_server.add(*crew_turns(task.prompt, task.solution))
    solver = CrewSolver(
        CrewSettings(
            endpoint=ModelEndpoint(base_url=scripted_model_server.base_url, model="scripted")
        )
    )

    report = await run_suite(suite, solver, concurrency=2)

    statuses = {result.task_id: result.status for result in report.results}
    assert statuses == dict.fromkeys(statuses, TaskStatus.PASS)
    assert len(statuses) == len(suite.tasks) >= 11
    prompts = {task.id: task.prompt for task in suite.tasks}
    for result in report.results:
        assert result.container_runs == 1
        # Each task keeps the crew's own outcome: the document `solve --json` prints.
        assert isinstance(result.crew, CrewResult)
        assert result.crew.task == prompts[result.task_id]
        assert result.crew.solved is True
        assert result.crew.rounds == 4
        assert result.crew.total_tokens > 0
        assert result.crew.stop_reason is StopReason.TERMINATED
        assert len(result.crew.runs) == 1
        # Only the outcome's data: what crosses to a Ray driver and into the report.
        assert (result.crew.messages, result.crew.exception) == ([], None)


@pytest.mark.docker
async def test_code_tasks_check_the_crews_last_code_block(
    scripted_model_server: ScriptedModelServer, write_file: Any
) -> None:
    suite = load_suite(
        write_file(
            "code.yaml",
            """
            - id: add
              kind: code
              prompt: "def add(a, b):\\n"
              entry_point: add
              test: "def check(candidate):\\n    assert candidate(2, 3) == 5\\n"
            - id: sub
              kind: code
              prompt: "def sub(a, b):\\n"
              entry_point: sub
              test: "def check(candidate):\\n    assert candidate(5, 3) == 2\\n"
            """,
        )
    )
    add_task, sub_task = suite.tasks
    assert isinstance(add_task, CodeTask)
    assert isinstance(sub_task, CodeTask)
    scripted_model_server.add(
        *crew_turns("`add`", "def add(a, b):\n    return a + b\n\nprint(add(2, 3))\n"),
        # A wrong solution that still runs: the crew finishes, the suite's check fails it.
        *crew_turns("`sub`", "def sub(a, b):\n    return a + b\n\nprint(sub(5, 3))\n"),
    )
    solver = CrewSolver(
        CrewSettings(
            endpoint=ModelEndpoint(base_url=scripted_model_server.base_url, model="scripted")
        )
    )

    report = await run_suite(suite, solver, concurrency=2)

    by_id = {result.task_id: result for result in report.results}
    assert by_id["add"].status is TaskStatus.PASS
    assert by_id["add"].container_runs == 2  # the crew's own run, then the suite's check
    assert by_id["sub"].status is TaskStatus.FAIL


@pytest.mark.docker
def test_suite_cli_with_the_crew_solver_writes_a_report(
    scripted_model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    suite = load_suite("basics")
    chosen = [task for task in suite.tasks if task.id == "fibonacci-39"]
    assert len(chosen) == 1
    task = chosen[0]
    assert isinstance(task, AnswerTask)
    assert task.solution is not None
    scripted_model_server.add(*crew_turns(task.prompt, task.solution))
    report_path = tmp_path / "report.json"

    completed = run_cli(
        "suite", "run", "basics", "--solver", "crew", "--filter", "fibonacci-39",
        "--base-url", scripted_model_server.base_url, "--model", "scripted",
        "--report", str(report_path),
    )  # fmt: skip

    assert completed.returncode == 0, completed.stdout + completed.stderr
    report = json.loads(report_path.read_text())
    (result,) = report["results"]
    assert result["task_id"] == "fibonacci-39"
    assert result["status"] == "pass"
    assert CrewResult.model_validate(result["crew"]).model_dump(mode="json") == result["crew"]
    assert result["crew"]["rounds"] == 4
    assert result["crew"]["answer"] is not None


@pytest.mark.docker
def test_baseline_of_another_model_or_version_warns_on_one_line(
    scripted_model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    task = load_suite("basics").task("fibonacci-39")
    assert isinstance(task, AnswerTask)
    assert task.solution is not None
    baseline = tmp_path / "baseline.json"
    common = ("suite", "run", "basics", "--solver", "crew", "--filter", "fibonacci-39",
              "--base-url", scripted_model_server.base_url, "--model", "scripted")  # fmt: skip

    scripted_model_server.add(*crew_turns(task.prompt, task.solution))
    first = run_cli(*common, "--report", str(baseline))
    assert first.returncode == 0, first.stderr
    recorded = json.loads(baseline.read_text())
    assert (recorded["model"], recorded["sandcrew_version"]) == ("scripted", sandcrew.__version__)

    scripted_model_server.add(*crew_turns(task.prompt, task.solution))
    same = run_cli(*common, "--baseline", str(baseline))
    assert same.returncode == 0, same.stderr
    assert "warning" not in same.stderr

    baseline.write_text(
        json.dumps({**recorded, "model": "gpt-older", "sandcrew_version": "0.0.1"}),
        encoding="utf-8",
    )
    scripted_model_server.add(*crew_turns(task.prompt, task.solution))
    other = run_cli(*common, "--baseline", str(baseline))
    assert other.returncode == 0, other.stderr  # a warning, not an error
    warnings = [line for line in other.stderr.splitlines() if "warning" in line]
    assert warnings == [
        f"warning: --baseline {baseline} was run with model 'gpt-older' (now 'scripted') and "
        f"sandcrew 0.0.1 (now {sandcrew.__version__}); a change in verdicts may come from that"
    ]
    assert "No regressions" in other.stdout


@pytest.mark.docker
def test_suite_cli_takes_the_crews_budgets_and_request_timeout(
    scripted_model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    task = load_suite("basics").task("fibonacci-39")
    assert isinstance(task, AnswerTask)
    assert task.solution is not None
    coder, *_ = crew_turns(task.prompt, task.solution)
    # the coder answers after the request timeout: the task stops as "slow", not hung
    scripted_model_server.add(coder.model_copy(update={"delay": 3.0}))
    scripted_model_server.require_all_used = False
    report_path = tmp_path / "report.json"

    completed = run_cli(
        "suite", "run", "basics", "--solver", "crew", "--filter", "fibonacci-39",
        "--base-url", scripted_model_server.base_url, "--model", "scripted",
        "--report", str(report_path), "--token-budget", "1500", "--time-budget", "60",
        "--request-timeout", "1",
    )  # fmt: skip

    assert "Traceback" not in completed.stderr
    (result,) = json.loads(report_path.read_text())["results"]
    assert result["status"] != "pass"
    assert "no answer within 1.0 s" in result["detail"]
    (request,) = scripted_model_server.requests_for("coder")
    assert request.body["max_tokens"] < 1500  # the task's token budget caps the reply


def test_crew_flags_are_refused_for_other_solvers() -> None:
    completed = run_cli("suite", "run", "basics", "--solver", "canonical", "--token-budget", "9")
    assert completed.returncode != 0
    assert "--token-budget only applies to --solver crew" in completed.stderr
