"""The crew through the Python API: repair loops, failure paths and admin mode."""

from __future__ import annotations

from typing import Any

import pytest

from sandcrew.agents import Message, StopReason
from sandcrew.crew import (
    APPROVAL_TEXT,
    COMMENTS_HEADLINE,
    NO_CODE_REPLY,
    Crew,
    CrewMode,
    ReviewVerdict,
    solve_task,
)
from sandcrew.sandbox import DockerSandbox, ExecutionResult
from sandcrew.testing import ScriptedModelServer, ScriptedSandbox, Turn
from tests.crew.conftest import (
    FIBONACCI_ANSWER,
    FIBONACCI_CODE,
    FIBONACCI_TASK,
    admin_final_turn,
    coder_turn,
    happy_path_turns,
    review_turn,
    settings_for,
)

NO_PRINT_CODE = """```python
def fibonacci(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a

fibonacci(39)
```"""

NAME_ERROR_CODE = """```python
print(fib(39))
```"""

BROKEN_SYNTAX_CODE = """```python
print(fibonacci(39)
```"""


def is_role_play(body: dict[str, Any]) -> bool:
    return "You are in a role play game" in str(body["messages"][0].get("content"))


def selection_turn(reply: str) -> Turn:
    """The admin model answering a speaker-selection (role-play) request."""
    return Turn(agent="admin", when=is_role_play, content=reply)


def speakers(messages: list[Message]) -> list[str | None]:
    return [message.sender for message in messages]


@pytest.mark.docker
async def test_happy_path_python_api(scripted_model_server: ScriptedModelServer) -> None:
    scripted_model_server.add(*happy_path_turns())

    result = await solve_task(FIBONACCI_TASK, settings_for(scripted_model_server))

    assert result.solved
    assert result.answer is not None
    assert FIBONACCI_ANSWER in result.answer
    assert speakers(result.messages) == ["admin", "coder", "reviewer", "runner", "admin"]
    assert len(result.runs) == 1
    assert result.runs[0].stdout.strip() == FIBONACCI_ANSWER
    assert result.last_code is not None
    assert "print(fibonacci(39))" in result.last_code
    # The coder saw the introductions and the task.
    coder_request = scripted_model_server.requests_for("coder")[0].body
    texts = [str(m.get("content")) for m in coder_request["messages"]]
    assert any(FIBONACCI_TASK in text for text in texts)
    assert any("I will review Python code" in text for text in texts)
    assert coder_request["temperature"] == 0.4


async def test_a_sandbox_that_does_not_say_leaves_the_coder_to_the_standard_library(
    scripted_model_server: ScriptedModelServer, fake_sandbox: ScriptedSandbox
) -> None:
    scripted_model_server.add(*happy_path_turns())

    result = await solve_task(
        FIBONACCI_TASK, settings_for(scripted_model_server), sandbox=fake_sandbox
    )

    assert result.solved
    [coder_request] = scripted_model_server.requests_for("coder")
    system = coder_request.messages[0]["content"]
    assert "use the Python standard library only; avoid external packages unless" in system


async def test_reviewer_comments_send_the_coder_back(
    scripted_model_server: ScriptedModelServer, fake_sandbox: ScriptedSandbox
) -> None:
    scripted_model_server.add(
        coder_turn(NO_PRINT_CODE),
        review_turn(is_print_result_to_console=False),
        coder_turn(FIBONACCI_CODE, contains=COMMENTS_HEADLINE),
        review_turn(),
        admin_final_turn(),
    )

    result = await solve_task(
        FIBONACCI_TASK, settings_for(scripted_model_server), sandbox=fake_sandbox
    )

    assert result.solved
    assert speakers(result.messages) == [
        "admin",
        "coder",
        "reviewer",
        "coder",
        "reviewer",
        "runner",
        "admin",
    ]
    first_review = result.messages[2]
    assert isinstance(first_review.data, ReviewVerdict)
    assert not first_review.data.approved
    assert first_review.content.startswith(COMMENTS_HEADLINE)
    assert "does not print its result" in first_review.content
    assert result.messages[4].content == APPROVAL_TEXT
    assert len(result.runs) == 1  # the rejected code never ran


@pytest.mark.docker
async def test_runner_error_sends_the_traceback_to_the_coder(
    scripted_model_server: ScriptedModelServer,
) -> None:
    scripted_model_server.add(
        coder_turn(NAME_ERROR_CODE),
        review_turn(),
        coder_turn(FIBONACCI_CODE, contains="NameError"),
        review_turn(),
        admin_final_turn(),
    )

    result = await solve_task(FIBONACCI_TASK, settings_for(scripted_model_server))

    assert result.solved
    assert speakers(result.messages) == [
        "admin",
        "coder",
        "reviewer",
        "runner",
        "coder",
        "reviewer",
        "runner",
        "admin",
    ]
    failed_run = result.messages[3].data
    assert isinstance(failed_run, ExecutionResult)
    assert failed_run.exit_code == 1
    assert "NameError" in failed_run.stderr
    assert [run.exit_code for run in result.runs] == [1, 0]


async def test_code_that_does_not_parse_is_never_approved(
    scripted_model_server: ScriptedModelServer,
    fake_sandbox: ScriptedSandbox,
) -> None:
    # The scripted reviewer model approves the broken code; the crew must not.
    scripted_model_server.add(
        coder_turn(BROKEN_SYNTAX_CODE),
        review_turn(),
        coder_turn(FIBONACCI_CODE, contains="does not parse"),
        review_turn(),
        admin_final_turn(),
    )

    result = await solve_task(
        FIBONACCI_TASK, settings_for(scripted_model_server), sandbox=fake_sandbox
    )

    assert result.solved
    verdict = result.messages[2].data
    assert isinstance(verdict, ReviewVerdict)
    assert not verdict.approved
    assert verdict.claims.is_print_result_to_console  # the model said yes …
    assert verdict.facts.syntax_error is not None  # … the code proved otherwise
    assert "does not parse (line 1" in result.messages[2].content
    assert len(result.runs) == 1
    assert "print(fibonacci(39))\n" in (result.last_code or "")


async def test_reviewer_that_never_calls_the_function_reviews_in_plain_text(
    scripted_model_server: ScriptedModelServer,
    fake_sandbox: ScriptedSandbox,
) -> None:
    scripted_model_server.add(
        coder_turn(FIBONACCI_CODE),
        Turn(agent="reviewer", tools=True, content="Looks fine to me.", times=3),
        Turn(agent="reviewer", tools=False, contains="APPROVE", content="APPROVE"),
        admin_final_turn(),
    )

    result = await solve_task(
        FIBONACCI_TASK, settings_for(scripted_model_server), sandbox=fake_sandbox
    )

    assert result.solved, result.stop_detail
    reviewer_requests = scripted_model_server.requests_for("reviewer")
    assert len(reviewer_requests) == 4
    choices = [request.body.get("tool_choice") for request in reviewer_requests]
    forced = {"type": "function", "function": {"name": "review_code_block"}}
    assert choices == [forced, forced, forced, None]
    assert "tools" not in reviewer_requests[3].body
    review = result.messages[2]
    verdict = review.data
    assert isinstance(verdict, ReviewVerdict)
    assert verdict.approved
    assert review.notes[-1] == (
        "reviewed without tools (no function call in 3 attempt(s)); the model's verdict: APPROVE"
    )
    assert len(result.runs) == 1


async def test_a_plain_text_rejection_sends_the_code_back(
    scripted_model_server: ScriptedModelServer,
) -> None:
    ollama = "registry.ollama.ai/library/gemma:2b does not support tools"
    scripted_model_server.add(
        coder_turn(FIBONACCI_CODE),
        Turn(agent="reviewer", tools=True, status=400, error_message=ollama),
        Turn(agent="reviewer", content="REJECT: use an iterative loop instead"),
        coder_turn(FIBONACCI_CODE),
        # the endpoint is known to take no tools: the second review goes straight to text
        Turn(agent="reviewer", tools=False, content="APPROVE."),
        admin_final_turn(),
    )

    result = await solve_task(FIBONACCI_TASK, settings_for(scripted_model_server))

    assert result.solved, result.stop_detail
    first_review = result.messages[2]
    assert isinstance(first_review.data, ReviewVerdict)
    assert not first_review.data.approved
    assert "use an iterative loop instead" in first_review.content
    assert "does not support tools" in first_review.notes[-1]
    assert len(scripted_model_server.requests_for("reviewer")) == 3
    assert len(result.runs) == 1


async def test_max_rounds_stops_with_its_reason(
    scripted_model_server: ScriptedModelServer, fake_sandbox: ScriptedSandbox
) -> None:
    scripted_model_server.add(coder_turn(FIBONACCI_CODE), review_turn())

    result = await solve_task(
        FIBONACCI_TASK, settings_for(scripted_model_server, max_rounds=3), sandbox=fake_sandbox
    )

    assert not result.solved
    assert result.stop_reason is StopReason.MAX_ROUNDS
    assert result.rounds == 3
    assert len(result.runs) == 1


async def test_token_budget_stops_with_its_reason(
    scripted_model_server: ScriptedModelServer, fake_sandbox: ScriptedSandbox
) -> None:
    scripted_model_server.add(
        coder_turn(
            FIBONACCI_CODE,
            usage={"prompt_tokens": 900, "completion_tokens": 200, "total_tokens": 1100},
        )
    )

    result = await solve_task(
        FIBONACCI_TASK, settings_for(scripted_model_server, token_budget=1000), sandbox=fake_sandbox
    )

    assert not result.solved
    assert result.stop_reason is StopReason.TOKEN_BUDGET
    assert result.total_tokens == 1100
    assert "1000" in result.stop_detail


async def test_reply_without_code_goes_back_to_the_coder_before_any_run(
    scripted_model_server: ScriptedModelServer, fake_sandbox: ScriptedSandbox
) -> None:
    scripted_model_server.add(
        Turn(agent="coder", content="I would compute it with a loop."),
        review_turn(),
        coder_turn(FIBONACCI_CODE, contains="no code block"),
        review_turn(),
        admin_final_turn(),
    )

    result = await solve_task(
        FIBONACCI_TASK, settings_for(scripted_model_server), sandbox=fake_sandbox
    )

    assert result.solved
    assert "There is no code block" in result.messages[2].content
    # The reviewer, not the runner, sends it back: the only run is of the fixed code.
    assert NO_CODE_REPLY not in [m.content for m in result.messages]
    assert [run.stdout.strip() for run in result.runs] == ["63245986"]


@pytest.mark.docker
async def test_bash_blocks_run_too(scripted_model_server: ScriptedModelServer) -> None:
    scripted_model_server.add(
        coder_turn("```bash\necho $((6 * 7))\n```"),
        review_turn(),
        admin_final_turn("42"),
    )

    result = await solve_task("What is 6 times 7?", settings_for(scripted_model_server))

    assert result.solved
    assert result.runs[0].language == "bash"
    assert result.runs[0].stdout.strip() == "42"


@pytest.mark.parametrize("mode", [CrewMode.ADMIN, CrewMode.WORKFLOW_ADMIN])
async def test_admin_modes_reach_the_answer(
    scripted_model_server: ScriptedModelServer, fake_sandbox: ScriptedSandbox, mode: CrewMode
) -> None:
    if mode is CrewMode.ADMIN:
        scripted_model_server.add(
            selection_turn("From coder"),
            happy_path_turns()[0],
            selection_turn("From reviewer"),
            happy_path_turns()[1],
            selection_turn("From runner"),
            selection_turn("From admin"),
            admin_final_turn(),
        )
    else:
        # The workflow leaves one candidate each time: the admin is never asked.
        scripted_model_server.add(*happy_path_turns())

    result = await solve_task(
        FIBONACCI_TASK, settings_for(scripted_model_server, mode=mode), sandbox=fake_sandbox
    )

    assert result.solved, result.stop_detail
    assert speakers(result.messages) == ["admin", "coder", "reviewer", "runner", "admin"]
    selections = [r for r in scripted_model_server.requests_for("admin") if is_role_play(r.body)]
    assert len(selections) == (4 if mode is CrewMode.ADMIN else 0)
    for request in selections:
        assert request.body["temperature"] == 0
        assert request.body["max_tokens"] == 128
        assert request.body["stop"] == [":"]


@pytest.mark.docker
async def test_a_crew_reused_for_two_tasks_reports_each_tasks_own_runs(
    scripted_model_server: ScriptedModelServer,
) -> None:
    scripted_model_server.add(*happy_path_turns(), *happy_path_turns())
    settings = settings_for(scripted_model_server)

    async with DockerSandbox(settings.sandbox) as sandbox, Crew(settings, sandbox) as crew:
        first = await crew.solve(FIBONACCI_TASK)
        second = await crew.solve(FIBONACCI_TASK)

    assert first.solved
    assert second.solved
    assert len(first.runs) == 1
    assert len(second.runs) == 1
    assert first.runs[0].run_id != second.runs[0].run_id
    assert crew.client.is_closed()
