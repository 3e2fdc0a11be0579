"""The transcript module: what the writer appends, the reader reads back as the same events."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

from sandcrew.agents import (
    FunctionCallAttempt,
    FunctionCallRequiredError,
    ModelEndpoint,
    StopReason,
    TextMessage,
    ToolCall,
    ToolCallMessage,
    Usage,
)
from sandcrew.crew import CrewResult, CrewSettings
from sandcrew.errors import UserError
from sandcrew.sandbox import ExecutionResult
from sandcrew.transcript import (
    TRANSCRIPT_FORMAT,
    AttemptEvent,
    HeaderEvent,
    MessageEvent,
    ResultEvent,
    RunEvent,
    TranscriptWriter,
    read_transcript,
)

RUN = ExecutionResult(
    language="python",
    exit_code=0,
    stdout="63245986\n",
    stderr="",
    duration=0.2,
    image="sandcrew/python:latest",
    run_id="run-1",
    timeout=10,
    memory_limit_bytes=256 * 2**20,
)
SETTINGS = CrewSettings(
    endpoint=ModelEndpoint(base_url="http://127.0.0.1:9/v1", model="m", api_key="sk-secret")
)


def _outcome(exception: BaseException | None = None) -> CrewResult:
    return CrewResult(
        task="fib(39)?",
        solved=exception is None,
        answer="63245986" if exception is None else None,
        stop_reason=StopReason.TERMINATED if exception is None else StopReason.ERROR,
        stop_detail="done",
        rounds=4,
        total_tokens=120,
        duration=1.23456,
        runs=[RUN],
        last_code="print(63245986)",
        exception=exception,
    )


def test_the_reader_reads_back_what_the_writer_wrote(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    opening = TextMessage(role="user", content="fib(39)?", sender="admin")
    reply = TextMessage(
        content="```python\nprint(1)\n```", sender="coder", usage=Usage(total_tokens=9)
    )
    run_message = TextMessage(content="[RUNNER_RESULT] exit code 0", sender="runner", data=RUN)
    with path.open("w", encoding="utf-8") as file:
        writer = TranscriptWriter(file, keep=True)
        writer.header("fib(39)?", SETTINGS)
        for message in (opening, reply, run_message):
            writer.message(message)
        writer.result(_outcome())

    events = read_transcript(path)

    assert events == writer.events
    header, first, second, run, closing = events
    assert isinstance(header, HeaderEvent)
    assert header.format == TRANSCRIPT_FORMAT
    assert "sk-secret" not in path.read_text()
    assert isinstance(first, MessageEvent)
    assert first.message == opening
    assert isinstance(second, MessageEvent)
    assert second.message == reply
    assert isinstance(run, RunEvent)
    assert run.run == RUN
    assert run.sender == "runner"
    assert isinstance(closing, ResultEvent)
    assert closing.result.model_dump(mode="json") == _outcome().model_dump(mode="json")


def test_a_required_call_the_model_got_wrong_is_kept_before_the_result(tmp_path: Path) -> None:
    wrong = ToolCallMessage(
        tool_calls=[ToolCall(id="1", name="review_code_block", arguments="{}")], sender="reviewer"
    )
    error = FunctionCallRequiredError(
        "no valid call", attempts=[FunctionCallAttempt(reply=wrong, errors=["missing approved"])]
    )
    path = tmp_path / "chat.jsonl"
    with path.open("w", encoding="utf-8") as file:
        TranscriptWriter(file).result(_outcome(error))

    attempt, closing = read_transcript(path)

    assert isinstance(attempt, AttemptEvent)
    assert (attempt.attempt, attempt.reply, attempt.errors) == (1, wrong, ["missing approved"])
    assert isinstance(closing, ResultEvent)
    assert closing.result.error == str(error)
    assert closing.result.exception is None  # the exception itself stays in its process


def test_a_transcript_of_another_format_is_refused_with_the_versions(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    header = HeaderEvent(
        format=1,
        sandcrew="0.0.1",
        task="t",
        started=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
        models={},
        endpoint=None,
        settings={},
    )
    path.write_text(header.model_dump_json() + "\n" + json.dumps({"event": "message"}) + "\n")

    with pytest.raises(
        UserError, match=f"format 1; this sandcrew reads format {TRANSCRIPT_FORMAT}"
    ):
        read_transcript(path)
