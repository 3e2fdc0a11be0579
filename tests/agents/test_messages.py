"""Messages: content views, typed termination, serialization."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, TypeAdapter

from sandcrew.agents import (
    CLEAR_MESSAGES,
    TERMINATE,
    AggregateMessage,
    Message,
    TextMessage,
    ToolCall,
    ToolCallMessage,
    ToolCallResult,
    ToolResultMessage,
    Usage,
    is_clear,
    is_terminate,
    terminate_message,
)


class Verdict(BaseModel):
    approved: bool
    comments: list[str]


CALL = ToolCall(id="c1", name="review", arguments='{"ok": true}')
RESULT = ToolCallResult(id="c1", name="review", content="looks good", ok=True)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (TextMessage(content=TERMINATE), True),
        (TextMessage(content=f"  \n{TERMINATE}\n "), True),
        (TextMessage(content="done", terminate=True), True),
        (TextMessage(content=f"I will say {TERMINATE} when we are done"), False),
        (TextMessage(content=f"{TERMINATE}."), False),
        (TextMessage(content="terminate"), False),
        (ToolCallMessage(tool_calls=[CALL], text=TERMINATE), True),
        (AggregateMessage(tool_calls=[CALL], results=[RESULT]), False),
    ],
    ids=["exact", "padded", "flag", "mid-sentence", "with-suffix", "word", "tool-text", "agg"],
)
def test_is_terminate_needs_the_whole_content(message: Message, expected: bool) -> None:
    assert is_terminate(message) is expected


def test_is_clear_needs_the_whole_content() -> None:
    assert is_clear(TextMessage(content=f" {CLEAR_MESSAGES} "))
    assert not is_clear(TextMessage(content=f"please {CLEAR_MESSAGES}"))


def test_terminate_message_has_marker_and_flag() -> None:
    message = terminate_message("teacher")
    assert message.content == TERMINATE
    assert message.terminate
    assert message.sender == "teacher"


def test_content_views() -> None:
    assert ToolCallMessage(tool_calls=[CALL]).content == ""
    assert ToolCallMessage(tool_calls=[CALL], text="calling").content == "calling"
    two = [RESULT, ToolCallResult(id="c2", name="run", content="42", ok=False)]
    assert ToolResultMessage(results=two).content == "looks good\n42"
    aggregate = AggregateMessage(tool_calls=[CALL], results=[RESULT], sender="reviewer")
    assert aggregate.content == "looks good"
    assert aggregate.call_message.tool_calls == [CALL]
    assert aggregate.result_message.results == [RESULT]
    assert aggregate.result_message.sender == "reviewer"


def test_messages_round_trip_through_json_with_structured_data() -> None:
    adapter: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
    messages: list[Message] = [
        TextMessage(role="user", content="task", sender="user"),
        TextMessage(
            content="ok",
            sender="reviewer",
            data=Verdict(approved=True, comments=["fine"]),
            usage=Usage(prompt_tokens=3, completion_tokens=2, total_tokens=5),
        ),
        ToolCallMessage(tool_calls=[CALL], sender="reviewer"),
        ToolResultMessage(results=[RESULT], sender="runner"),
        AggregateMessage(tool_calls=[CALL], results=[RESULT], data={"exit_code": 0}),
    ]
    dumped = adapter.dump_json(messages)
    assert b'"approved":true' in dumped
    loaded = adapter.validate_json(dumped)
    assert [type(m) for m in loaded] == [type(m) for m in messages]
    assert loaded[1].data == {"approved": True, "comments": ["fine"]}
    assert loaded[1].usage == Usage(prompt_tokens=3, completion_tokens=2, total_tokens=5)
    assert loaded[4].data == {"exit_code": 0}
    # in memory the structured payload keeps its type, for workflow conditions
    assert isinstance(messages[1].data, Verdict)


def test_usage_adds_up() -> None:
    total = Usage(prompt_tokens=1, completion_tokens=2, total_tokens=3) + Usage(
        prompt_tokens=10, completion_tokens=20, total_tokens=30
    )
    assert total == Usage(prompt_tokens=11, completion_tokens=22, total_tokens=33)
