"""Our messages in the Chat Completions format, as one agent sees the conversation.

The agent's own messages become ``assistant`` messages (with ``tool_calls`` and ``tool``
results for its function calls); other agents' messages become ``user`` messages carrying
the sender as ``name``; ``system`` text messages stay ``system``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ._messages import (
    AggregateMessage,
    Message,
    TextMessage,
    ToolCall,
    ToolCallMessage,
    ToolResultMessage,
)

_NAME_PATTERN = re.compile(r"[^a-zA-Z0-9_-]")


def participant_name(sender: str) -> str:
    # The Chat Completions `name` field only allows [a-zA-Z0-9_-]{1,64}.
    return _NAME_PATTERN.sub("_", sender)[:64]


def to_chat_messages(
    messages: Sequence[Message], *, agent_name: str, system_message: str | None = None
) -> list[dict[str, Any]]:
    """Our messages in the Chat Completions format, as seen by the agent ``agent_name``.

    ``system_message`` is put first only when ``messages`` hold no system message.
    """
    converted: list[dict[str, Any]] = []
    has_system = any(isinstance(m, TextMessage) and m.role == "system" for m in messages)
    if system_message and not has_system:
        converted.append({"role": "system", "content": system_message})
    for message in messages:
        own = message.sender == agent_name
        if isinstance(message, TextMessage):
            if message.role == "system":
                converted.append({"role": "system", "content": message.content})
            elif own:
                converted.append({"role": "assistant", "content": message.content})
            else:
                converted.append(_user_message(message.content, message.sender))
        elif isinstance(message, ToolCallMessage | AggregateMessage) and own:
            converted.append(
                {
                    "role": "assistant",
                    "content": message.text,
                    "tool_calls": [_tool_call_param(call) for call in message.tool_calls],
                }
            )
            if isinstance(message, AggregateMessage):
                converted.extend(
                    {"role": "tool", "tool_call_id": result.id, "content": result.content}
                    for result in message.results
                )
        elif isinstance(message, ToolResultMessage) and own:
            converted.append({"role": "assistant", "content": message.content})
        else:
            converted.append(_user_message(_as_text(message), message.sender))
    return converted


def _user_message(content: str, sender: str | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "user", "content": content}
    if sender:
        message["name"] = participant_name(sender)
    return message


def _tool_call_param(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def _as_text(message: Message) -> str:
    """How another agent's function calls read to this agent (it cannot see their tools)."""
    if isinstance(message, ToolCallMessage):
        calls = ", ".join(f"{call.name}({call.arguments})" for call in message.tool_calls)
        return "\n".join(part for part in (message.text, f"Function calls: {calls}") if part)
    return message.content
