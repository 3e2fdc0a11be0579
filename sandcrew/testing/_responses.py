"""Chat Completions response bodies (JSON and SSE chunks) built from a scripted turn."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

from sandcrew.agents._chat_format import content_text
from sandcrew.testing._script import Turn


def count_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: whitespace-separated words."""
    return len(text.split())


def usage_for(turn: Turn, body: Mapping[str, Any]) -> dict[str, int]:
    if turn.usage is not None:
        prompt = turn.usage.get("prompt_tokens", 0)
        completion = turn.usage.get("completion_tokens", 0)
        total = turn.usage.get("total_tokens", prompt + completion)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}
    prompt = sum(
        count_tokens(content_text(message.get("content")))
        for message in body.get("messages") or []
        if isinstance(message, Mapping)
    )
    completion = count_tokens(turn.content or turn.refusal or "") + sum(
        count_tokens(call.arguments_json()) for call in turn.tool_calls
    )
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _tool_calls(turn: Turn, request_number: int) -> list[dict[str, Any]]:
    return [
        {
            "id": call.id or f"call_{request_number}_{index}",
            "type": "function",
            "function": {"name": call.name, "arguments": call.wire_arguments()},
        }
        for index, call in enumerate(turn.tool_calls)
    ]


def _finish_reason(turn: Turn) -> str:
    if turn.finish_reason is not None:
        return turn.finish_reason
    return "tool_calls" if turn.tool_calls else "stop"


def completion_body(turn: Turn, body: Mapping[str, Any], request_number: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.content, "refusal": None}
    if turn.refusal is not None:
        message["refusal"] = turn.refusal
    if turn.tool_calls:
        message["tool_calls"] = _tool_calls(turn, request_number)
    return {
        "id": f"chatcmpl-scripted-{request_number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model", "scripted")),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": _finish_reason(turn),
                "logprobs": None,
            }
        ],
        **({} if turn.omit_usage else {"usage": usage_for(turn, body)}),
    }


def stream_chunks(
    turn: Turn, body: Mapping[str, Any], request_number: int
) -> Iterator[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of a streamed answer, in order."""
    base = {
        "id": f"chatcmpl-scripted-{request_number}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": str(body.get("model", "scripted")),
    }
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        return {**base, "choices": [choice]}

    yield chunk({"role": "assistant", "content": ""})
    if turn.refusal is not None:
        yield chunk({"refusal": turn.refusal})
    content = turn.content or ""
    # Split the text in a few pieces so clients really have to assemble it.
    for start in range(0, len(content), 16):
        yield chunk({"content": content[start : start + 16]})
    for index, call in enumerate(_tool_calls(turn, request_number)):
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ]
            }
        )
        yield chunk(
            {
                "tool_calls": [
                    {"index": index, "function": {"arguments": call["function"]["arguments"]}}
                ]
            }
        )
    yield chunk({}, _finish_reason(turn))
    if include_usage and not turn.omit_usage:
        yield {**base, "choices": [], "usage": usage_for(turn, body)}


def sse(chunks: Iterator[dict[str, Any]]) -> Iterator[bytes]:
    for item in chunks:
        yield f"data: {json.dumps(item)}\n\n".encode()
    yield b"data: [DONE]\n\n"


def error_body(message: str, error_type: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}
