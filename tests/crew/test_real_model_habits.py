"""The crew against real models' habits, through the Python API on the sandbox test double."""

from __future__ import annotations

import json

from sandcrew.agents import StopReason
from sandcrew.crew import solve_task
from sandcrew.testing import (
    FIBONACCI_ANSWER,
    FIBONACCI_TASK,
    PERSONAS,
    ScriptedModelServer,
    ScriptedRun,
    ScriptedSandbox,
    Turn,
)
from tests.crew.conftest import (
    FIBONACCI_CODE,
    admin_final_turn,
    coder_turn,
    review_turn,
    settings_for as settings_on,
)


async def test_reasoning_never_reaches_the_runner_or_the_answer(
    fake_sandbox: ScriptedSandbox,
) -> None:
    with ScriptedModelServer(PERSONAS["reasoning"].script()) as server:
        result = await solve_task(FIBONACCI_TASK, settings_on(server), sandbox=fake_sandbox)

    assert result.solved
    assert result.answer == f"The 39th Fibonacci number is {FIBONACCI_ANSWER}."
    # the fence inside <think> never ran; the transcript keeps the reasoning
    assert [code for code in (run.code for run in fake_sandbox.runs)] == [result.last_code]
    assert "not this one" not in (result.last_code or "")
    assert result.messages[1].content.startswith("<think>")
    # the next speakers' context has no reasoning in it
    admin_request = server.requests_for("admin")[0]
    assert "<think>" not in json.dumps(admin_request.messages)


async def test_a_fallback_speaker_is_recorded_on_the_result(
    fake_sandbox: ScriptedSandbox,
) -> None:
    persona = PERSONAS["rambling-selector"]
    with ScriptedModelServer(persona.script("admin")) as server:
        result = await solve_task(
            FIBONACCI_TASK, settings_on(server, mode="admin"), sandbox=fake_sandbox
        )

    assert result.solved
    assert len(result.notes) == 1
    assert "'coder' speaks next by round robin" in result.notes[0]


async def test_requests_stay_within_the_models_context(
    scripted_model_server: ScriptedModelServer,
) -> None:
    long_failure = ScriptedRun(exit_code=1, stderr="ValueError: " + "x" * 3000 + "\n")
    sandbox = ScriptedSandbox({"attempt": long_failure, "print(fibonacci(39))": ScriptedRun(
        stdout=f"{FIBONACCI_ANSWER}\n")}, languages=("python", "bash"))  # fmt: skip
    failing = [f"```python\nprint('attempt {n}' + undefined_{n})\n```" for n in range(4)]
    for code in failing:
        scripted_model_server.add(coder_turn(code), review_turn())
    scripted_model_server.add(coder_turn(FIBONACCI_CODE), review_turn(), admin_final_turn())
    settings = settings_on(scripted_model_server, context_tokens=2048, max_output_chars=1000)

    result = await solve_task(FIBONACCI_TASK, settings, sandbox=sandbox)

    assert result.solved, result.stop_detail
    budget = (2048 - 1024) * 3
    for request in scripted_model_server.requests:
        sent = sum(len(str(message.get("content") or "")) for message in request.messages)
        assert sent <= budget + 200  # the note about left-out messages
    last_coder = scripted_model_server.requests_for("coder")[-1].messages
    texts = [str(message.get("content")) for message in last_coder]
    assert any(FIBONACCI_TASK in text for text in texts)  # the task always stays
    assert any("left out to fit the model's context" in text for text in texts)
    assert "attempt 3" in texts[-3]  # the latest code stays (before review and run)


async def test_the_admin_that_never_signals_stops_with_that_reason(
    fake_sandbox: ScriptedSandbox,
) -> None:
    with ScriptedModelServer(PERSONAS["never-signals"].script()) as server:
        result = await solve_task(FIBONACCI_TASK, settings_on(server), sandbox=fake_sandbox)

    assert not result.solved
    assert result.stop_reason is StopReason.NO_COMPLETION_SIGNAL
    assert result.stop_detail.startswith("admin answered a successful result 2 times")


async def test_context_overflow_from_the_endpoint_stops_with_that_reason(
    scripted_model_server: ScriptedModelServer, fake_sandbox: ScriptedSandbox
) -> None:
    scripted_model_server.add(
        Turn(
            agent="coder",
            status=400,
            error_message="the request exceeds the available context size, try increasing it",
        )
    )

    result = await solve_task(
        FIBONACCI_TASK, settings_on(scripted_model_server), sandbox=fake_sandbox
    )

    assert result.stop_reason is StopReason.CONTEXT_OVERFLOW
    assert "exceeds the available context size" in result.stop_detail
    assert len(scripted_model_server.requests) == 1
