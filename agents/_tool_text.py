"""Function calls that a server left in the reply's text, and parallel calls that repeat.

Servers that do not parse tool calls hand back what the model wrote: a ``<tool_call>{...}
</tool_call>`` block (Hermes/Qwen templates) or a bare JSON object ``{"name": ...,
"arguments": {...}}`` (``"parameters"`` in Llama's template), sometimes in a code fence.
Such text is read as a call only when it names one of the functions that were offered.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from typing import Any

from ._messages import ToolCall

_TOOL_CALL_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_FENCED = re.compile(r"\A```[\w-]*[ \t]*\n(.*?)\n?[ \t]*```\s*\Z", re.DOTALL)
_THINKING = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)


def calls_from_text(content: str, offered: Collection[str]) -> list[ToolCall]:
    """The calls written in ``content`` to functions named in ``offered`` (may be empty)."""
    text = _THINKING.sub("", content).strip()
    blocks = _TOOL_CALL_BLOCK.findall(text)
    if not blocks:
        fenced = _FENCED.match(text)
        blocks = [fenced.group(1) if fenced else text]
    calls: list[ToolCall] = []
    for index, block in enumerate(blocks):
        call = _call_from_json(block.strip(), offered, index)
        if call is None:
            return []
        calls.append(call)
    return calls


def _call_from_json(text: str, offered: Collection[str], index: int) -> ToolCall | None:
    if not text.startswith("{"):
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    name = value.get("name")
    if not isinstance(name, str) or name not in offered:
        return None
    arguments: Any = value.get("arguments", value.get("parameters", {}))
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return ToolCall(id=f"text_call_{index}", name=name, arguments=arguments)


def canonical_arguments(arguments: str) -> str:
    """The arguments in one spelling (sorted keys), or as sent when they are not JSON."""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except ValueError:
        return arguments.strip()


def without_repeats(calls: Sequence[ToolCall]) -> tuple[list[ToolCall], list[str]]:
    """``calls`` with exact repeats (same function, same arguments) removed, and notes."""
    kept: list[ToolCall] = []
    seen: set[tuple[str, str]] = set()
    notes: list[str] = []
    for call in calls:
        key = (call.name, canonical_arguments(call.arguments))
        if key in seen:
            notes.append(f"dropped a repeated identical call to {call.name}")
            continue
        seen.add(key)
        kept.append(call)
    return kept, notes
