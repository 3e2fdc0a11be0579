"""Pretty-print each reply with rich: sender, Markdown content (code blocks highlighted),
function calls and results as tables."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, Group, RenderableType
from rich.markdown import Markdown
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ._agent import Agent, GenerateReplyOptions
from ._messages import (
    AggregateMessage,
    Message,
    ToolCall,
    ToolCallMessage,
    ToolCallResult,
    ToolResultMessage,
)
from ._stop_policy import is_terminate


def _calls_table(calls: Sequence[ToolCall]) -> Table:
    table = Table(title="function calls", title_justify="left", expand=True)
    table.add_column("function", style="bold cyan", no_wrap=True)
    table.add_column("arguments", overflow="fold")
    for call in calls:
        table.add_row(call.name, call.arguments)
    return table


def _results_table(results: Sequence[ToolCallResult]) -> Table:
    table = Table(title="results", title_justify="left", expand=True)
    table.add_column("function", style="bold cyan", no_wrap=True)
    table.add_column("ok", no_wrap=True)
    table.add_column("result", overflow="fold")
    for result in results:
        status = Text("yes", style="green") if result.ok else Text("no", style="bold red")
        table.add_row(result.name, status, result.content)
    return table


def render_message(message: Message) -> RenderableType:
    """A rich renderable for one message (a panel titled with the sender)."""
    parts: list[RenderableType] = []
    if isinstance(message, ToolCallMessage | AggregateMessage):
        if message.text:
            parts.append(Markdown(message.text))
        parts.append(_calls_table(message.tool_calls))
        if isinstance(message, AggregateMessage):
            parts.append(_results_table(message.results))
    elif isinstance(message, ToolResultMessage):
        parts.append(_results_table(message.results))
    elif message.content:
        parts.append(Markdown(message.content, code_theme="monokai"))
    else:
        parts.append(Text("(empty reply)", style="dim italic"))
    footer = []
    if message.usage is not None:
        footer.append(
            f"tokens: {message.usage.prompt_tokens} in, {message.usage.completion_tokens} out"
        )
    if is_terminate(message):
        footer.append("terminates the chat")
    return Panel(
        Group(*parts),
        title=f"[bold]Message from {message.sender or '?'}[/bold]",
        title_align="left",
        subtitle=" · ".join(footer) or None,
        subtitle_align="right",
        border_style="red" if is_terminate(message) else "blue",
    )


class PrintMessageMiddleware:
    """Prints every reply of the wrapped agent on ``console`` (stdout by default).

    ``enabled=False`` turns printing off without unwrapping the agent.
    """

    name = "print_message"

    def __init__(self, console: Console | None = None, *, enabled: bool = True) -> None:
        self.console = console if console is not None else Console()
        self.enabled = enabled

    async def __call__(
        self, messages: Sequence[Message], options: GenerateReplyOptions, agent: Agent
    ) -> Message:
        reply = await agent.generate_reply(messages, options)
        if self.enabled:
            self.console.print(render_message(reply))
        return reply
