"""PrintMessageMiddleware renders replies with rich."""

from __future__ import annotations

import io
import re

from rich.console import Console

from sandcrew.agents import (
    AggregateMessage,
    PrintMessageMiddleware,
    TextMessage,
    ToolCall,
    ToolCallResult,
    Usage,
    terminate_message,
)
from sandcrew.testing import ScriptedAgent


def recording_console() -> Console:
    return Console(
        file=io.StringIO(), record=True, width=100, force_terminal=True, color_system="truecolor"
    )


async def test_prints_sender_content_and_highlighted_code() -> None:
    console = recording_console()
    code = "Here you go:\n\n```python\nprint(sum(range(10)))\n```"
    usage = Usage(prompt_tokens=12, completion_tokens=7, total_tokens=19)
    agent = ScriptedAgent("coder", [TextMessage(content=code, sender="coder", usage=usage)])

    reply = await agent.use(PrintMessageMiddleware(console)).generate_reply([])

    assert reply.content == code
    text = console.export_text(clear=False)
    assert "Message from coder" in text
    assert "Here you go:" in text
    assert "print(sum(range(10)))" in text
    assert "```" not in text  # rendered as a code block, not raw Markdown
    assert "tokens: 12 in, 7 out" in text
    # syntax highlighting colours the code differently from the prose
    (code_line,) = [
        line for line in console.export_text(styles=True).splitlines() if "print" in line
    ]
    assert len(set(re.findall(r"38;2;\d+;\d+;\d+", code_line))) >= 3


async def test_prints_tool_calls_and_results_as_tables() -> None:
    console = recording_console()
    message = AggregateMessage(
        tool_calls=[ToolCall(id="c1", name="review_code_block", arguments='{"ok": true}')],
        results=[ToolCallResult(id="c1", name="review_code_block", content="approved", ok=False)],
        sender="reviewer",
    )
    await (
        ScriptedAgent("reviewer", [message]).use(PrintMessageMiddleware(console)).generate_reply([])
    )
    text = console.export_text(clear=False)
    assert "function calls" in text
    assert "review_code_block" in text
    assert '{"ok": true}' in text
    assert "results" in text
    assert "approved" in text
    assert "no" in text


async def test_terminate_message_is_marked() -> None:
    console = recording_console()
    agent = ScriptedAgent("teacher", [terminate_message("teacher")])
    await agent.use(PrintMessageMiddleware(console)).generate_reply([])
    assert "terminates the chat" in console.export_text(clear=False)


async def test_disabled_printing_prints_nothing() -> None:
    console = recording_console()
    agent = ScriptedAgent("coder", ["hello"]).use(PrintMessageMiddleware(console, enabled=False))
    assert (await agent.generate_reply([])).content == "hello"
    assert console.export_text(clear=False) == ""
