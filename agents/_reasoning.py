"""Reasoning text that models put before their answer (``<think>…</think>``).

Reasoning models (Qwen3, QwQ, DeepSeek-R1 distills) write their chain of thought in a
``<think>`` block before the answer; the block is sometimes long and sometimes never closed
(the reply ran out of tokens or hit a stop sequence inside it), and some servers drop the
opening tag because the chat template already wrote it. Everything the product reads from a
reply — signals, speaker names, code, the answer, the context the next speaker gets — reads
the *visible* text only; the transcript keeps the reply as the model wrote it.
"""

from __future__ import annotations

import re

from ._messages import (
    AggregateMessage,
    Message,
    TextMessage,
    ToolCallMessage,
)

_CLOSED_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_OPEN_TAG = re.compile(r"<think>", re.IGNORECASE)
_CLOSE_TAG = re.compile(r"</think>", re.IGNORECASE)


def has_reasoning(text: str) -> bool:
    """True when ``text`` holds a reasoning block (closed, unclosed or only its end tag)."""
    return bool(_OPEN_TAG.search(text) or _CLOSE_TAG.search(text))


def is_unfinished_reasoning(text: str) -> bool:
    """True when the reply stopped inside its reasoning: nothing visible came after it."""
    return has_reasoning(text) and not strip_reasoning(text)


def strip_reasoning(text: str) -> str:
    """The visible part of a reply: ``text`` without its reasoning blocks.

    Closed blocks are removed wherever they are; an unclosed ``<think>`` hides everything
    after it; a lone ``</think>`` (the server's template opened the block) hides everything
    before it. Text without reasoning comes back unchanged.
    """
    if not has_reasoning(text):
        return text
    visible = _CLOSED_BLOCK.sub("", text)
    opening = _OPEN_TAG.search(visible)
    if opening is not None:
        visible = visible[: opening.start()]
    closings = list(_CLOSE_TAG.finditer(visible))
    if closings:
        visible = visible[closings[-1].end() :]
    return visible.strip()


def without_reasoning(message: Message) -> Message:
    """The message as later readers see it: its text without reasoning (same otherwise)."""
    if isinstance(message, TextMessage):
        if not has_reasoning(message.content):
            return message
        return message.model_copy(update={"content": strip_reasoning(message.content)})
    if isinstance(message, ToolCallMessage | AggregateMessage):
        if message.text is None or not has_reasoning(message.text):
            return message
        return message.model_copy(update={"text": strip_reasoning(message.text) or None})
    return message
