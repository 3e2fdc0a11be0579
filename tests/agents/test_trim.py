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
)
from sandcrew.core import trim_middle
from sandcrew.errors import UserError
from sandcrew.testing import ScriptedAgent


def test_trim_middle_keeps_head_and_tail() -> None:
    text = "HEAD" + "x" * 1000 + "Traceback: ZeroDivisionError"
    trimmed = trim_middle(text, 200)
    assert trimmed.startswith("HEADxxx")
    assert trimmed.endswith("Traceback: ZeroDivisionError")
    assert len(trimmed) <= 200 + 10
    assert "characters trimmed] …" in trimmed
    assert trim_middle("short", 200) == "short"


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


def test_fit_context_keeps_the_task_and_each_senders_latest_message() -> None:
    from sandcrew.agents._trim import fit_context

    history = [
        TextMessage(role="system", content="rules"),
        TextMessage(content="the task", sender="admin"),
        *(TextMessage(content=f"code {n} " + "x" * 500, sender="coder") for n in range(3)),
        *(TextMessage(content=f"run {n} " + "y" * 500, sender="runner") for n in range(3)),
    ]

    fitted = fit_context(history, max_total_chars=1500, keep_first=1)

    assert [m.content[:6] for m in fitted] == [
        "rules",
        "the ta",
        "[4 ear",
        "code 2",
        "run 2 ",
    ]
    assert fit_context(history, max_total_chars=100_000, keep_first=1) == history
