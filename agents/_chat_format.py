"""Our messages in the Chat Completions format, as one agent sees the conversation.

The agent's own messages become ``assistant`` messages (with ``tool_calls`` and ``tool``
results for its function calls); other agents' messages become ``user`` messages carrying
the sender as ``name``; ``system`` text messages stay ``system`` (the open form).
:func:`in_form` lays the same conversation out for servers whose chat templates accept only
alternating turns (:class:`ChatForm`).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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


# --- the strict form: what Gemma's and Mistral's chat templates accept -------------------


class ChatForm(enum.StrEnum):
    """How a conversation is laid out in a request.

    Many open models' chat templates (Gemma, Mistral, as vLLM, TGI and llama.cpp apply them)
    accept only an optional system message followed by user and assistant turns that
    alternate, starting with user; Gemma 2's also refuses the system role.
    """

    OPEN = "open"
    """Every message as its own turn, other agents' as ``user`` turns carrying their name."""
    ALTERNATING = "alternating"
    """An optional system message, then user/assistant turns alternating from user;
    consecutive messages of one role merged, each prefixed with its sender (``reviewer: …``)."""
    ALTERNATING_NO_SYSTEM = "alternating-no-system"
    """The alternating form with the system message folded into the first user turn."""


@dataclass
class ChatFormMemory:
    """The form each model was found to need, shared by the agents of one endpoint (so only
    the first request of a chat pays for finding it)."""

    forms: dict[str, ChatForm] = field(default_factory=dict)

    def get(self, model: str) -> ChatForm | None:
        return self.forms.get(model)

    def remember(self, model: str, form: ChatForm) -> None:
        self.forms[model] = form


def alternates(messages: Sequence[dict[str, Any]], *, system: bool = True) -> bool:
    """True when ``messages`` already have the alternating form (a system message first only
    when ``system``)."""
    turns = list(messages)
    if turns and turns[0].get("role") == "system":
        if not system:
            return False
        turns = turns[1:]
    expected = ("user", "assistant")
    return all(
        message.get("role") == expected[index % 2] and not message.get("tool_calls")
        for index, message in enumerate(turns)
    )


def in_form(
    messages: Sequence[dict[str, Any]], form: ChatForm, *, agent_name: str
) -> list[dict[str, Any]]:
    """The open-form ``messages`` (from :func:`to_chat_messages`) laid out in ``form``.

    In the alternating forms: the leading system message(s) stay first (or open the first
    user turn); a later system message, a tool result and another agent's message become
    user text named by its sender; the agent's own function calls become assistant text;
    the agent's own messages before anyone else spoke (its introduction) open the first
    user turn under its name; consecutive turns of one role are merged.
    """
    if form is ChatForm.OPEN:
        return list(messages)
    system: list[str] = []
    turns: list[tuple[str, list[str]]] = []
    for message in messages:
        role = message.get("role")
        text = content_text(message.get("content"))
        if role in ("system", "developer") and not turns:
            system.append(text)
            continue
        if role == "assistant":
            calls = ", ".join(_call_text(call) for call in message.get("tool_calls") or [])
            text = "\n".join(part for part in (text, calls and f"Function calls: {calls}") if part)
            if turns:
                _add_turn(turns, "assistant", text)
            else:
                _add_turn(turns, "user", f"{participant_name(agent_name)}: {text}")
            continue
        sender = message.get("name") or {"tool": "function result", "system": "system"}.get(
            str(role)
        )
        _add_turn(turns, "user", f"{sender}: {text}" if sender else text)
    instructions = "\n\n".join(part for part in system if part)
    laid_out = [{"role": role, "content": "\n\n".join(parts)} for role, parts in turns]
    if not instructions:
        return laid_out
    if form is ChatForm.ALTERNATING:
        return [{"role": "system", "content": instructions}, *laid_out]
    if not laid_out:
        return [{"role": "user", "content": instructions}]
    first = laid_out[0]
    return [{"role": "user", "content": f"{instructions}\n\n{first['content']}"}, *laid_out[1:]]


def _add_turn(turns: list[tuple[str, list[str]]], role: str, text: str) -> None:
    if not text:
        return
    if turns and turns[-1][0] == role:
        turns[-1][1].append(text)
    else:
        turns.append((role, [text]))


def content_text(content: Any) -> str:
    """The text of a Chat Completions message ``content`` (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def _call_text(call: dict[str, Any]) -> str:
    function = call.get("function") or {}
    return f"{function.get('name')}({function.get('arguments')})"
