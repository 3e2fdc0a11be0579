"""Personas of model endpoints: how real servers answer the crew's Fibonacci task.

Each persona is a script for :class:`~sandcrew.testing.ScriptedModelServer` that answers the
task ``What's the 39th fibonacci number?`` the way a real model or server does — loose tool
calls, servers without tool support, empty replies, missing usage, a stalled server — so
the crew's tolerance can be replayed against any setup::

    from sandcrew.testing import ScriptedModelServer, persona_turns

    with ScriptedModelServer(persona_turns("ollama-no-tools")) as server:
        ...  # sandcrew solve "What's the 39th fibonacci number?" --base-url server.base_url
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sandcrew.testing._script import ScriptedToolCall, Turn

FIBONACCI_TASK = "What's the 39th fibonacci number?"
FIBONACCI_ANSWER = "63245986"
FIBONACCI_REPLY = """Here is the code.

```python
def fibonacci(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a

print(fibonacci(39))
```"""
REVIEW_NAME = "review_code_block"
GOOD_REVIEW: dict[str, Any] = {
    "has_multiple_code_blocks": False,
    "is_top_level_statement": True,
    "is_python_code_block": True,
    "is_print_result_to_console": True,
}
OLLAMA_NO_TOOLS = "registry.ollama.ai/library/gemma2:2b does not support tools"
FORCED_CHOICE_REJECTED = "tool_choice must be 'auto' or 'none'"


def _coder(**fields: Any) -> Turn:
    return Turn(agent="coder", content=FIBONACCI_REPLY, **fields)


def _admin(**fields: Any) -> Turn:
    return Turn(
        agent="admin",
        system="You are the admin",
        content=f"The 39th Fibonacci number is {FIBONACCI_ANSWER}.\n[COMPLETE]",
        **fields,
    )


def _review(arguments: str | dict[str, Any] = GOOD_REVIEW, **fields: Any) -> Turn:
    call = ScriptedToolCall(name=REVIEW_NAME, arguments=arguments)
    return Turn(agent="reviewer", tool_calls=[call], **fields)


def _solved_with(*reviewer: Turn) -> list[Turn]:
    return [_coder(), *reviewer, _admin()]


def compliant() -> list[Turn]:
    return _solved_with(_review())


def booleans_as_strings() -> list[Turn]:
    loose = {name: str(value).lower() for name, value in GOOD_REVIEW.items()}
    return _solved_with(_review(loose))


def extra_argument() -> list[Turn]:
    return _solved_with(_review({**GOOD_REVIEW, "language": "python"}))


def fenced_arguments() -> list[Turn]:
    fenced = f"```json\n{json.dumps(GOOD_REVIEW)}\n```\nThe code is fine."
    return _solved_with(_review(fenced))


def arguments_as_object() -> list[Turn]:
    call = ScriptedToolCall(name=REVIEW_NAME, arguments=GOOD_REVIEW, as_object=True)
    return _solved_with(Turn(agent="reviewer", tool_calls=[call]))


def call_as_plain_json() -> list[Turn]:
    text = json.dumps({"name": REVIEW_NAME, "parameters": GOOD_REVIEW})
    return _solved_with(Turn(agent="reviewer", content=text))


def tool_call_block() -> list[Turn]:
    call = json.dumps({"name": REVIEW_NAME, "arguments": GOOD_REVIEW})
    return _solved_with(Turn(agent="reviewer", content=f"<tool_call>\n{call}\n</tool_call>"))


def parallel_identical_calls() -> list[Turn]:
    call = ScriptedToolCall(name=REVIEW_NAME, arguments=GOOD_REVIEW)
    return _solved_with(Turn(agent="reviewer", tool_calls=[call, call]))


def parallel_disagreeing_calls() -> list[Turn]:
    approve = ScriptedToolCall(name=REVIEW_NAME, arguments=GOOD_REVIEW)
    reject = ScriptedToolCall(
        name=REVIEW_NAME, arguments={**GOOD_REVIEW, "is_print_result_to_console": False}
    )
    return _solved_with(Turn(agent="reviewer", tool_calls=[reject, approve]), _review())


def ollama_no_tools() -> list[Turn]:
    return _solved_with(
        Turn(agent="reviewer", tools=True, status=400, error_message=OLLAMA_NO_TOOLS),
        Turn(agent="reviewer", tools=False, content="APPROVE"),
    )


def vllm_named_choice_only() -> list[Turn]:
    # vLLM without --enable-auto-tool-choice: only a named choice is accepted.
    return _solved_with(_review(tool_choice="named"))


def forced_choice_rejected() -> list[Turn]:
    return _solved_with(
        Turn(
            agent="reviewer",
            tool_choice="named",
            status=400,
            error_message=FORCED_CHOICE_REJECTED,
        ),
        Turn(
            agent="reviewer",
            tool_choice="required",
            status=400,
            error_message=FORCED_CHOICE_REJECTED,
        ),
        _review(tool_choice="auto"),
    )


def forced_choice_empty() -> list[Turn]:
    # LM Studio may answer a forced choice with empty content.
    return _solved_with(
        Turn(agent="reviewer", tool_choice="named", content=""),
        _review(tool_choice="auto"),
    )


def empty_replies() -> list[Turn]:
    return [
        Turn(agent="coder", content=""),
        _coder(),
        Turn(agent="reviewer", content=""),
        _review(),
        _admin(),
    ]


def no_usage() -> list[Turn]:
    return [_coder(omit_usage=True), _review(omit_usage=True), _admin(omit_usage=True)]


def stalled_server() -> list[Turn]:
    # Answers long after any reasonable request timeout (run with a short one).
    return [_coder(delay=5.0)]


def invalid_review_calls() -> list[Turn]:
    bad = {**GOOD_REVIEW, "is_python_code_block": "maybe"}
    return [_coder(), _review(bad, times=3)]


ENDPOINT_PERSONAS: dict[str, Callable[[], list[Turn]]] = {
    "compliant": compliant,
    "booleans-as-strings": booleans_as_strings,
    "extra-argument": extra_argument,
    "fenced-arguments": fenced_arguments,
    "arguments-as-object": arguments_as_object,
    "call-as-plain-json": call_as_plain_json,
    "tool-call-block": tool_call_block,
    "parallel-identical-calls": parallel_identical_calls,
    "parallel-disagreeing-calls": parallel_disagreeing_calls,
    "ollama-no-tools": ollama_no_tools,
    "vllm-named-choice-only": vllm_named_choice_only,
    "forced-choice-rejected": forced_choice_rejected,
    "forced-choice-empty": forced_choice_empty,
    "empty-replies": empty_replies,
    "no-usage": no_usage,
    "stalled-server": stalled_server,
    "invalid-review-calls": invalid_review_calls,
}
"""Persona name → the turns of its script."""
