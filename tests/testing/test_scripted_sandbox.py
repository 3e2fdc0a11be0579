"""ScriptedSandbox: the Sandbox test double users put under their own crews and suites."""

from __future__ import annotations

import pytest

from sandcrew.agents import ModelEndpoint
from sandcrew.crew import CrewSettings, solve_task
from sandcrew.sandbox import OutputEvent, Sandbox, SandboxConfig
from sandcrew.suites import AnswerTask, CanonicalSolver, LocalExecutor, Suite, run_suite
from sandcrew.testing import (
    ALL_CHECKS_PASS,
    FIBONACCI_ANSWER,
    FIBONACCI_TASK,
    ScriptedModelServer,
    ScriptedRun,
    ScriptedSandbox,
    ScriptedToolCall,
    Turn,
)

FIBONACCI_CODE = (
    "```python\ndef fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n"
    "        a, b = b, a + b\n    return a\n\nprint(fibonacci(39))\n```"
)


def test_it_is_a_sandbox() -> None:
    assert isinstance(ScriptedSandbox({}), Sandbox)


async def test_its_scripted_output_is_told_before_the_result() -> None:
    told: list[OutputEvent] = []

    async def on_output(event: OutputEvent) -> None:
        told.append(event)

    sandbox = ScriptedSandbox({"hello": ScriptedRun(stdout="hi\n", stderr="warn\n")})
    result = await sandbox.run("print('hello')", on_output=on_output)

    assert [(event.stream, event.text) for event in told] == [
        ("stdout", "hi\n"),
        ("stderr", "warn\n"),
    ]
    assert result.stdout == "hi\n"


async def test_a_crew_test_on_a_scripted_model_and_a_scripted_sandbox(
    scripted_model_server: ScriptedModelServer,
) -> None:
    sandbox = ScriptedSandbox({"print(fibonacci(39))": ScriptedRun(stdout="63245986\n")})
    scripted_model_server.add(
        Turn(agent="coder", content=f"Here is the code.\n\n{FIBONACCI_CODE}"),
        Turn(
            agent="reviewer",
            tool_calls=[ScriptedToolCall(name="review_code_block", arguments=ALL_CHECKS_PASS)],
        ),
        Turn(
            agent="admin",
            system="You are the admin",
            content=f"The 39th Fibonacci number is {FIBONACCI_ANSWER}.\n[COMPLETE]",
        ),
    )
    endpoint = ModelEndpoint(
        base_url=scripted_model_server.base_url, api_key="test-key", model="scripted"
    )

    result = await solve_task(FIBONACCI_TASK, CrewSettings(endpoint=endpoint), sandbox=sandbox)

    assert result.solved
    assert FIBONACCI_ANSWER in (result.answer or "")
    [run] = sandbox.runs
    assert run.language == "python"
    assert "print(fibonacci(39))" in run.code
    assert [r.stdout for r in result.runs] == ["63245986\n"]


async def test_a_suite_runs_on_it_through_a_sandbox_factory() -> None:
    made: list[ScriptedSandbox] = []

    def scripted(config: SandboxConfig, *, slots: int) -> Sandbox:
        sandbox = ScriptedSandbox(
            {
                "print(42)": ScriptedRun(stdout="42\n"),
                "print(41)": ScriptedRun(stdout="41\n"),
                "loop()": ScriptedRun(exit_code=124, timed_out=True),
            },
            default_timeout=config.timeout,
        )
        made.append(sandbox)
        return sandbox

    suite = Suite(
        name="scripted",
        source="test",
        tasks=(
            AnswerTask(id="right", prompt="p", expected=42, solution="print(42)"),
            AnswerTask(id="wrong", prompt="p", expected=42, solution="print(41)"),
            AnswerTask(id="slow", prompt="p", expected=42, solution="loop()"),
        ),
    )
    report = await run_suite(
        suite,
        CanonicalSolver(),
        concurrency=2,
        executor=LocalExecutor(sandbox_factory=scripted),
        sandbox_config=SandboxConfig(timeout=3),
    )

    assert [(r.task_id, r.verdict) for r in report.results] == [
        ("right", "pass"),
        ("wrong", "fail"),
        ("slow", "timeout, confirmed"),
    ]
    # One sandbox for the run, one for the timeout's second run alone; both closed.
    assert len(made) == 2
    assert all(sandbox.started and sandbox.closed for sandbox in made)
    assert [run.code for run in made[1].runs] == ["loop()"]
    assert report.result_for("slow").retries == (
        "timed out after 3s with others running; run again alone",
    )


async def test_an_unscripted_program_or_a_run_after_close_fails_the_test() -> None:
    sandbox = ScriptedSandbox({"print(1)": ScriptedRun(stdout="1\n")})
    with pytest.raises(AssertionError, match="no outcome for this program"):
        await sandbox.run("print(2)")
    with pytest.raises(AssertionError, match="not ruby"):
        await sandbox.run("print(1)", "ruby")
    assert (await sandbox.run("print(1)")).stdout == "1\n"
    await sandbox.aclose()
    with pytest.raises(AssertionError, match=r"after aclose\(\)"):
        await sandbox.run("print(1)")
