"""Long outputs are trimmed (head + tail) in what a model sees; the transcript keeps them."""

from __future__ import annotations

import pytest

from sandcrew.agents import (
    AggregateMessage,
    GroupChat,
    TextMessage,
    ToolCall,
    ToolCallResult,
    TrimContextMiddleware,
    trim_text,
)
from sandcrew.errors import UserError
from sandcrew.testing import ScriptedAgent


def test_trim_text_keeps_head_and_tail() -> None:
    text = "HEAD" + "x" * 1000 + "Traceback: ZeroDivisionError"
    trimmed = trim_text(text, 200)
    assert trimmed.startswith("HEADxxx")
    assert trimmed.endswith("Traceback: ZeroDivisionError")
    assert len(trimmed) <= 200 + 10
    assert "characters trimmed] …" in trimmed
    assert trim_text("short", 200) == "short"


async def test_middleware_trims_context_but_not_the_transcript() -> None:
    log = "[RUNNER_RESULT]\n" + "line\n" * 500 + "63245986"
    tool = AggregateMessage(
        tool_calls=[ToolCall(id="1", name="run", arguments="{}")],
        results=[ToolCallResult(id="1", name="run", content=log)],
        sender="tool_user",
    )
    coder_model = ScriptedAgent("coder", ["thanks"])
    coder = coder_model.use(TrimContextMiddleware(max_chars=300))
    runner = ScriptedAgent("runner", [TextMessage(content=log, sender="runner")])
    chat = GroupChat([ScriptedAgent("tool_user", [tool]), runner, coder])

    result = await chat.call([], max_round=3)

    seen = coder_model.received[0]
    assert [type(m) for m in seen] == [AggregateMessage, TextMessage]
    for message in seen:
        assert len(message.content) < 400
        assert message.content.endswith("63245986")
    assert [m.content for m in result.messages[:2]] == [log, log]
    with pytest.raises(UserError, match="max_chars must be >= 100"):
        TrimContextMiddleware(10)
