"""`sandcrew solve` end to end: real CLI process, scripted model over HTTP, real containers."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sandcrew.agents import AggregateMessage, StopReason
from sandcrew.crew import CrewResult
from sandcrew.testing import ScriptedModelServer, ScriptedToolCall, Turn
from sandcrew.transcript import (
    TRANSCRIPT_FORMAT,
    AttemptEvent,
    HeaderEvent,
    MessageEvent,
    ResultEvent,
    RunEvent,
    read_transcript,
)
from tests.crew.conftest import (
    FIBONACCI_ANSWER,
    FIBONACCI_TASK,
    admin_final_turn,
    coder_turn,
    happy_path_turns,
    review_turn,
    run_cli,
)
from tests.sandbox.helpers import our_containers, shared_client

# The crew runs its code in real containers.
pytestmark = pytest.mark.docker


def test_solve_fibonacci_prints_answer_and_exits_0(
    scripted_model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    scripted_model_server.add(*happy_path_turns())
    transcript = tmp_path / "chat.jsonl"

    completed = run_cli(
        "solve",
        FIBONACCI_TASK,
        "--base-url",
        scripted_model_server.base_url,
        "--model",
        "scripted",
        "--json",
        "--transcript",
        str(transcript),
    )

    assert completed.returncode == 0, completed.stderr
    summary = json.loads(completed.stdout)
    # The document is the outcome model's own dump, and reads back as one.
    result = CrewResult.model_validate(summary)
    assert result.model_dump(mode="json") == summary
    assert summary["format"] == 1
    assert result.solved is True
    assert result.answer is not None
    assert FIBONACCI_ANSWER in result.answer
    assert result.stop_reason is StopReason.TERMINATED
    assert result.rounds == 4
    [run] = result.runs
    assert run.exit_code == 0
    assert run.stdout.strip() == FIBONACCI_ANSWER
    assert run.image == "sandcrew/python:latest"
    assert result.last_code is not None
    assert "fib" in result.last_code
    assert result.total_tokens > 0

    # At most four model calls on the happy path; the admin's opening needs none.
    chat_requests = [
        request for request in scripted_model_server.requests if request.method == "POST"
    ]
    assert [request.agent for request in chat_requests] == ["coder", "reviewer", "admin"]

    header, opening, code, review, run_event, answer, closing = read_transcript(transcript)
    assert isinstance(header, HeaderEvent)
    assert header.format == TRANSCRIPT_FORMAT
    assert header.models == {"admin": "scripted", "coder": "scripted", "reviewer": "scripted"}
    assert header.endpoint == scripted_model_server.base_url
    assert header.settings["max_rounds"] == 20
    assert "api_key" not in header.settings["endpoint"]
    messages = [opening, code, review, answer]
    assert all(isinstance(event, MessageEvent) for event in messages)
    speakers = [event.message.sender for event in messages if isinstance(event, MessageEvent)]
    assert speakers == ["admin", "coder", "reviewer", "admin"]
    assert isinstance(run_event, RunEvent)
    assert run_event.sender == "runner"
    assert run_event.run.exit_code == 0
    assert run_event.run.duration > 0
    assert run_event.content.startswith("[RUNNER_RESULT]")
    assert isinstance(review, MessageEvent)
    assert isinstance(review.message.data, dict)
    assert review.message.data["approved"] is True
    assert review.message.data["claims"]["is_python_code_block"] is True
    assert isinstance(code, MessageEvent)
    assert code.message.usage is not None
    assert code.message.usage.total_tokens > 0
    assert isinstance(answer, MessageEvent)
    assert answer.message.terminate is True
    elapsed = [event.elapsed for event in read_transcript(transcript)]
    assert elapsed == sorted(elapsed)
    # The transcript closes with the very outcome --json printed.
    assert isinstance(closing, ResultEvent)
    assert closing.result.model_dump(mode="json") == summary


def test_solve_streams_the_chat_and_prints_the_answer(
    scripted_model_server: ScriptedModelServer,
) -> None:
    scripted_model_server.add(*happy_path_turns())

    completed = run_cli(
        "solve", FIBONACCI_TASK, "--base-url", scripted_model_server.base_url, "--model", "scripted"
    )

    assert completed.returncode == 0, completed.stderr
    for speaker in ("admin", "coder", "reviewer", "runner"):
        assert f"Message from {speaker}" in completed.stdout
    assert "[RUNNER_RESULT]" in completed.stdout
    assert f"answer: The 39th Fibonacci number is {FIBONACCI_ANSWER}." in completed.stdout


def test_quiet_prints_only_the_answer(scripted_model_server: ScriptedModelServer) -> None:
    scripted_model_server.add(*happy_path_turns())

    completed = run_cli(
        "solve",
        FIBONACCI_TASK,
        "--base-url",
        scripted_model_server.base_url,
        "--model",
        "scripted",
        "-q",
    )

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == f"The 39th Fibonacci number is {FIBONACCI_ANSWER}."


def test_not_solved_exits_1_with_the_stop_reason(
    scripted_model_server: ScriptedModelServer,
) -> None:
    scripted_model_server.add(happy_path_turns()[0], happy_path_turns()[1])

    completed = run_cli(
        "solve",
        FIBONACCI_TASK,
        "--base-url",
        scripted_model_server.base_url,
        "--model",
        "scripted",
        "--max-rounds",
        "2",
    )

    assert completed.returncode == 1
    assert "not solved (max_rounds)" in completed.stderr


def test_no_model_configured_exits_2_and_says_how() -> None:
    completed = run_cli("solve", FIBONACCI_TASK, env={"OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""})

    assert completed.returncode == 2
    assert "no model configured" in completed.stderr
    assert "OPENAI_API_KEY" in completed.stderr
    assert "--base-url" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_bad_option_values_exit_2_naming_the_setting(
    scripted_model_server: ScriptedModelServer,
) -> None:
    completed = run_cli(
        "solve",
        FIBONACCI_TASK,
        "--base-url",
        scripted_model_server.base_url,
        "--model",
        "scripted",
        "--max-rounds",
        "0",
    )

    assert completed.returncode == 2
    assert "max_rounds (command line)" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_model_endpoint_down_exits_3_before_any_chat() -> None:
    completed = run_cli("solve", FIBONACCI_TASK, "--base-url", "http://127.0.0.1:9/v1")

    assert completed.returncode == 3
    assert completed.stderr.startswith("error: the model endpoint http://127.0.0.1:9/v1 could")
    assert completed.stderr.count("\n") == 1
    assert "Traceback" not in completed.stderr


def test_model_endpoint_returning_500s_is_retried_then_exits_3(
    scripted_model_server: ScriptedModelServer,
) -> None:
    # The client retries twice by default: three requests, all failing.
    scripted_model_server.add(Turn(agent="coder", status=500, error_message="overloaded", times=3))

    completed = run_cli(
        "solve", FIBONACCI_TASK, "--base-url", scripted_model_server.base_url, "--model", "scripted"
    )

    assert completed.returncode == 3
    assert len(scripted_model_server.requests_for("coder")) == 3
    assert "not solved (error)" in completed.stderr
    assert "500" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_answer_with_markup_like_text_is_printed_verbatim(
    scripted_model_server: ScriptedModelServer,
) -> None:
    coder, reviewer, _ = happy_path_turns()
    scripted_model_server.add(
        coder,
        reviewer,
        Turn(agent="admin", content=f"It is {FIBONACCI_ANSWER} [/INST] [python]\n[COMPLETE]"),
    )

    completed = run_cli(
        "solve", FIBONACCI_TASK, "--base-url", scripted_model_server.base_url, "--model", "scripted"
    )

    assert completed.returncode == 0, completed.stderr
    assert f"answer: It is {FIBONACCI_ANSWER} [/INST] [python]" in completed.stdout


def test_transcript_keeps_the_reviewers_failed_attempts(
    scripted_model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    coder, _, _ = happy_path_turns()
    # Calls with arguments that cannot be repaired (a reviewer that makes no call at all
    # falls back to a plain-text review instead).
    bad_call = ScriptedToolCall(
        name="review_code_block", arguments={"has_multiple_code_blocks": "no"}
    )
    scripted_model_server.add(coder, Turn(agent="reviewer", tool_calls=[bad_call], times=3))
    transcript = tmp_path / "chat.jsonl"

    completed = run_cli(
        "solve", FIBONACCI_TASK, "--base-url", scripted_model_server.base_url,
        "--model", "scripted", "--transcript", str(transcript),
    )  # fmt: skip

    assert completed.returncode == 1
    events = read_transcript(transcript)
    attempts = [event for event in events if isinstance(event, AttemptEvent)]
    assert [attempt.attempt for attempt in attempts] == [1, 2, 3]
    assert all(
        isinstance(attempt.reply, AggregateMessage)
        and attempt.reply.tool_calls[0].name == "review_code_block"
        for attempt in attempts
    )
    assert all("'no' is not of type 'boolean'" in " ".join(attempt.errors) for attempt in attempts)
    assert isinstance(events[-1], ResultEvent)
    assert events[-1].result.stop_reason is StopReason.ERROR


def test_solve_says_which_agent_it_waits_for_on_stderr_only(
    scripted_model_server: ScriptedModelServer,
) -> None:
    coder, reviewer, admin = happy_path_turns()
    waiting_seen = threading.Event()
    # The coder's reply is held back until the CLI has said it waits for the coder: the line
    # must appear while the call is in flight, not after it.
    held_coder = coder.model_copy(update={"when": lambda body: waiting_seen.wait(60)})
    scripted_model_server.add(held_coder, reviewer, admin)
    command = [sys.executable, "-m", "sandcrew", "solve", FIBONACCI_TASK,
               "--base-url", scripted_model_server.base_url, "--model", "scripted"]  # fmt: skip
    lines: list[str] = []

    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as child:
        assert child.stderr is not None
        for line in child.stderr:
            lines.append(line.rstrip("\n"))
            if line.startswith("waiting for coder"):
                assert not scripted_model_server.requests_for(
                    "reviewer"
                )  # the coder has not answered
                waiting_seen.set()
        stdout = child.stdout.read() if child.stdout is not None else ""
        returncode = child.wait(timeout=120)

    assert returncode == 0, lines
    assert lines == [
        "waiting for coder (model scripted)…",
        "waiting for reviewer (model scripted)…",
        "waiting for admin (model scripted)…",
    ]
    assert "Message from coder" in stdout
    assert "waiting for" not in stdout
    assert our_containers(shared_client(), owner_pid=child.pid) == []


@pytest.mark.parametrize("flag", ["--quiet", "--json"])
def test_quiet_or_piped_json_solve_keeps_stderr_empty(
    scripted_model_server: ScriptedModelServer, flag: str
) -> None:
    # A piped --json run keeps stderr for its JSON error object alone.
    scripted_model_server.add(*happy_path_turns())

    completed = run_cli(
        "solve",
        FIBONACCI_TASK,
        "--base-url",
        scripted_model_server.base_url,
        "--model",
        "scripted",
        flag,
    )

    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == ""


def test_solve_json_escapes_every_control_character_and_keeps_other_text(
    scripted_model_server: ScriptedModelServer,
) -> None:
    # The program prints ESC, DEL and a C1 CSI (a screen clear on many terminals).
    hostile = "```python\nprint('esc\\x1b[2J del\\x7f csi\\x9b2J ünïcødé 中文')\n```"
    scripted_model_server.add(coder_turn(hostile), review_turn(), admin_final_turn())

    completed = run_cli(
        "solve",
        FIBONACCI_TASK,
        *("--base-url", scripted_model_server.base_url, "--model", "scripted", "--json"),
    )

    assert completed.returncode == 0, completed.stderr
    assert not any(ord(char) < 0x20 and char != "\n" for char in completed.stdout)
    assert not any(0x7F <= ord(char) < 0xA0 for char in completed.stdout)
    assert "ünïcødé 中文" in completed.stdout
    summary = json.loads(completed.stdout)
    (run,) = summary["runs"]
    assert run["stdout"] == "esc\x1b[2J del\x7f csi\x9b2J ünïcødé 中文\n"
