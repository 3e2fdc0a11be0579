"""Personas: scripted models that answer the Fibonacci task the way real chat models do.

Each persona replays one habit of real models (a completion signal written loosely, a
``<think>`` block, a loose speaker name, an untagged code fence …) as a script for
:class:`~sandcrew.testing.ScriptedModelServer`, so the crew can be checked against it —
and users can replay the same behaviour against their own setup::

    from sandcrew.testing import PERSONAS, ScriptedModelServer

    with ScriptedModelServer(PERSONAS["signal-same-line"].script("workflow")) as server:
        ...  # sandcrew solve "What's the 39th fibonacci number?" --base-url server.base_url

A persona says whether the crew must *rescue* it (solve the task with at most
``extra_calls`` model calls over the compliant persona) or stop early naming ``cause``.
Scripts match requests by agent (``X-Sandcrew-Agent``) and system prompt only, so
``persona.script(mode)`` dumps to YAML for :func:`~sandcrew.testing.load_script`.

The registry :data:`PERSONAS` is a plain mapping from name to persona.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sandcrew.testing._script import ScriptedToolCall, Turn

Mode = Literal["workflow", "admin", "workflow+admin"]
MODES: tuple[Mode, ...] = ("workflow", "admin", "workflow+admin")

FIBONACCI_TASK = "What's the 39th fibonacci number?"
FIBONACCI_ANSWER = "63245986"
FIBONACCI_FUNCTION = """def fibonacci(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a
"""
FIBONACCI_SCRIPT = FIBONACCI_FUNCTION + "\nprint(fibonacci(39))\n"

ROLE_PLAY_SYSTEM = "You are in a role play game"
"""How a speaker-selection request's system prompt starts (AutoGen.NET's role play)."""
ADMIN_SYSTEM = "You are the admin"
"""How the crew admin's own system prompt starts."""

ALL_CHECKS_PASS = {
    "has_multiple_code_blocks": False,
    "is_top_level_statement": True,
    "is_python_code_block": True,
    "is_print_result_to_console": True,
}
"""The arguments of a ``review_code_block`` call that passes every check."""
COMPLIANT_SELECTIONS = ("From coder", "From reviewer", "From runner", "From admin")
"""The speaker-selection replies of one pass through the crew in admin mode."""


def coder_turn(content: str, *, times: int = 1) -> Turn:
    return Turn(agent="coder", content=content, times=times)


def reviewer_turn(*, text: str | None = None, times: int = 1, **checks: bool) -> Turn:
    call = ScriptedToolCall(name="review_code_block", arguments={**ALL_CHECKS_PASS, **checks})
    return Turn(agent="reviewer", content=text, tool_calls=[call], times=times)


def admin_turn(content: str, *, times: int = 1) -> Turn:
    return Turn(agent="admin", system=ADMIN_SYSTEM, content=content, times=times)


def selection_turn(content: str, *, times: int = 1) -> Turn:
    return Turn(agent="admin", system=ROLE_PLAY_SYSTEM, content=content, times=times)


COMPLIANT_CODER = f"Here is the code.\n\n```python\n{FIBONACCI_SCRIPT}```"
COMPLIANT_ADMIN = f"The 39th Fibonacci number is {FIBONACCI_ANSWER}.\n[COMPLETE]"


@dataclass(frozen=True)
class Persona:
    """A scripted model with one real-world habit, and what the crew must make of it.

    ``coder``, ``reviewer`` and ``admin`` are the turns for each role (in order);
    ``selections`` are the speaker-selection replies in admin mode (one per request).
    ``rescued``: the crew must solve the task with at most ``extra_calls`` model calls over
    the compliant persona and ``runs`` container runs; otherwise it must stop with a stop
    reason ``stop_reason`` whose detail contains ``cause``, and ``sandcrew solve`` must exit
    with ``exit_code`` (1: not solved; 3: the endpoint failed). ``modes`` lists the modes
    the habit matters in.
    """

    name: str
    habit: str
    coder: Sequence[Turn] = (coder_turn(COMPLIANT_CODER),)
    reviewer: Sequence[Turn] = (reviewer_turn(),)
    admin: Sequence[Turn] = (admin_turn(COMPLIANT_ADMIN),)
    selections: Sequence[Turn] = tuple(selection_turn(reply) for reply in COMPLIANT_SELECTIONS)
    rescued: bool = True
    extra_calls: int = 0
    runs: int = 1
    stop_reason: str = "terminated"
    cause: str | None = None
    exit_code: int = 1
    modes: tuple[Mode, ...] = ("workflow",)
    settings: dict[str, Any] = field(default_factory=dict)
    """Crew settings the persona needs (as tables and keys of a sandcrew TOML config file)."""

    def script(self, mode: Mode = "workflow") -> list[Turn]:
        """The turns a :class:`~sandcrew.testing.ScriptedModelServer` answers with."""
        turns = [*self.coder, *self.reviewer, *self.admin]
        if mode == "admin":
            turns += self.selections
        return [turn.model_copy() for turn in turns]

    def model_calls(self, mode: Mode = "workflow") -> int:
        """How many model requests the script answers."""
        return sum(turn.times for turn in self.script(mode))


def _personas(*personas: Persona) -> dict[str, Persona]:
    return {persona.name: persona for persona in personas}


def _admin_says(name: str, habit: str, content: str, **fields: Any) -> Persona:
    return Persona(name, habit, admin=(admin_turn(content),), **fields)


_THINKING_CODER = (
    "<think>\nThe user wants fib(39). A first idea:\n```python\nprint('not this one')\n```\n"
    "No, a loop is better; fib(1) = fib(2) = 1.\n</think>\n" + COMPLIANT_CODER
)
_THINKING_ADMIN = (
    "<think>\nThe runner printed 63245986: that answers the task. Should I say [COMPLETE]? "
    f"Yes.\n</think>\n{COMPLIANT_ADMIN}"
)

PERSONAS: dict[str, Persona] = _personas(
    Persona(
        "compliant",
        "answers exactly as the crew's prompts ask",
        modes=MODES,
    ),
    _admin_says(
        "signal-same-line",
        "puts the completion signal on the answer's line",
        f"The answer is {FIBONACCI_ANSWER}. [COMPLETE]",
        modes=MODES,
    ),
    _admin_says(
        "signal-bold",
        "writes the signal in bold",
        f"The answer is {FIBONACCI_ANSWER}.\n\n**[COMPLETE]**",
    ),
    _admin_says(
        "signal-lower-case",
        "writes the signal in lower case with a full stop",
        f"The answer is {FIBONACCI_ANSWER}.\n[complete].",
    ),
    _admin_says(
        "signal-backticks",
        "writes the signal as inline code",
        f"The answer is {FIBONACCI_ANSWER}.\n`[COMPLETE]`",
    ),
    _admin_says(
        "signal-bare-word",
        "writes COMPLETE without brackets",
        f"The answer is {FIBONACCI_ANSWER}.\nCOMPLETE",
    ),
    _admin_says(
        "signal-closing-remark",
        "adds a closing remark after the signal",
        f"The answer is {FIBONACCI_ANSWER}.\n[COMPLETE]\nLet me know if you need anything else!",
    ),
    _admin_says(
        "signal-after-code",
        "repeats the answer with the code before the signal",
        f"The program\n\n```python\n{FIBONACCI_SCRIPT}```\n\nprints {FIBONACCI_ANSWER}.\n"
        "[COMPLETE]",
    ),
    _admin_says(
        "signal-then-code-repeat",
        "puts the signal on its own line, then repeats the code that ran",
        f"{FIBONACCI_ANSWER}.\n[COMPLETE]\n\nFor reference, the code was:\n"
        f"```python\n{FIBONACCI_SCRIPT}```",
        modes=MODES,
    ),
    Persona(
        "signal-then-new-code",
        "puts the signal on its own line, then writes code that never ran",
        coder=(coder_turn(COMPLIANT_CODER, times=2),),
        reviewer=(reviewer_turn(times=2),),
        admin=(
            admin_turn(
                f"{FIBONACCI_ANSWER}.\n[COMPLETE]\n\nA faster way:\n"
                "```python\nprint(63245986)\n```",
                times=2,
            ),
        ),
        rescued=False,
        runs=2,
        stop_reason="no_completion_signal",
        cause="without a recognisable completion signal",
    ),
    Persona(
        "reasoning",
        "thinks in <think> blocks (with a stray code fence and the signal inside) first",
        coder=(coder_turn(_THINKING_CODER),),
        reviewer=(reviewer_turn(text="<think>\nOne block, prints, top level.\n</think>"),),
        admin=(admin_turn(_THINKING_ADMIN),),
        selections=tuple(
            selection_turn(f"<think>\nWho is next?\n</think>\n{reply}")
            for reply in COMPLIANT_SELECTIONS
        ),
        modes=MODES,
    ),
    Persona(
        "reasoning-cut-off",
        "is cut off inside its <think> block by the role-play stop sequence",
        selections=(
            selection_turn("<think>\nThe admin gave the task. Next"),
            *(
                selection_turn(f"<think>\nnext?\n</think>\n{reply}")
                for reply in COMPLIANT_SELECTIONS
            ),
        ),
        extra_calls=1,
        modes=("admin",),
    ),
    Persona(
        "loose-speaker-names",
        "names the next speaker loosely",
        selections=tuple(
            selection_turn(reply)
            for reply in (
                "From coder.",
                "**From reviewer**",
                "runner",
                "The next speaker should be: From admin",
            )
        ),
        modes=("admin",),
    ),
    Persona(
        "rambling-selector",
        "does not name a speaker for one selection, whatever it is told",
        selections=(
            selection_turn("Let me think about who should go next.", times=3),
            *(selection_turn(reply) for reply in COMPLIANT_SELECTIONS[1:]),
        ),
        extra_calls=2,
        modes=("admin",),
    ),
    Persona(
        "untagged-fence",
        "writes the code in a fence without a language",
        coder=(coder_turn(f"Here is the code:\n\n```\n{FIBONACCI_SCRIPT}```"),),
        modes=MODES,
    ),
    Persona(
        "function-then-usage",
        "writes a function block, then a block that uses it",
        coder=(
            coder_turn(
                f"First the function:\n\n```python\n{FIBONACCI_FUNCTION}```\n\n"
                "Then call it:\n\n```python\nprint(fibonacci(39))\n```"
            ),
        ),
        modes=MODES,
    ),
    Persona(
        "never-signals",
        "answers the result but never says the completion signal",
        coder=(coder_turn(COMPLIANT_CODER, times=2),),
        reviewer=(reviewer_turn(times=2),),
        admin=(admin_turn(f"The 39th Fibonacci number is {FIBONACCI_ANSWER}.", times=2),),
        selections=tuple(selection_turn(reply) for reply in COMPLIANT_SELECTIONS * 2),
        rescued=False,
        runs=2,
        stop_reason="no_completion_signal",
        cause="without a recognisable completion signal",
        modes=MODES,
    ),
    Persona(
        "signal-mid-text",
        "mentions the signal mid-sentence instead of ending with it",
        coder=(coder_turn(COMPLIANT_CODER, times=2),),
        reviewer=(reviewer_turn(times=2),),
        admin=(admin_turn(f"It is {FIBONACCI_ANSWER}; I will say [COMPLETE] later.", times=2),),
        rescued=False,
        runs=2,
        stop_reason="no_completion_signal",
        cause="without a recognisable completion signal",
    ),
    Persona(
        "small-context",
        "has a context too small for the crew's prompts",
        coder=(
            Turn(
                agent="coder",
                status=400,
                error_message="This model's maximum context length is 512 tokens. However, "
                "your messages resulted in 900 tokens.",
            ),
        ),
        reviewer=(),
        admin=(),
        selections=(selection_turn("From coder"),),
        rescued=False,
        runs=0,
        stop_reason="context_overflow",
        cause="exceeds the model's context",
        modes=MODES,
    ),
)
"""Every persona by name (a plain mapping; add yours with ``PERSONAS[name] = persona``)."""

# --- The model endpoint: loose tool calls, servers without (some) tool support, empty
# replies, missing usage, a stalled server.

OLLAMA_NO_TOOLS = "registry.ollama.ai/library/gemma2:2b does not support tools"
FORCED_CHOICE_REJECTED = "tool_choice must be 'auto' or 'none'"


def _review_call(arguments: str | dict[str, Any], **fields: Any) -> Turn:
    call = ScriptedToolCall(name="review_code_block", arguments=arguments)
    return Turn(agent="reviewer", tool_calls=[call], **fields)


def _reviewer_says(name: str, habit: str, *turns: Turn, **fields: Any) -> Persona:
    return Persona(name, habit, reviewer=turns, **fields)


_TEXT_CALL = json.dumps({"name": "review_code_block", "arguments": ALL_CHECKS_PASS})
_DISAGREEING = (
    ScriptedToolCall(
        name="review_code_block",
        arguments={**ALL_CHECKS_PASS, "is_print_result_to_console": False},
    ),
    ScriptedToolCall(name="review_code_block", arguments=ALL_CHECKS_PASS),
)

PERSONAS.update(
    _personas(
        _reviewer_says(
            "booleans-as-strings",
            'The review call says "true"/"false" instead of booleans (no schema enforcement).',
            _review_call({key: str(value).lower() for key, value in ALL_CHECKS_PASS.items()}),
        ),
        _reviewer_says(
            "extra-argument",
            "The review call adds an argument the function does not declare.",
            _review_call({**ALL_CHECKS_PASS, "language": "python"}),
        ),
        _reviewer_says(
            "fenced-arguments",
            "The review call's arguments come in a ```json fence, followed by a remark.",
            _review_call(f"```json\n{json.dumps(ALL_CHECKS_PASS)}\n```\nThe code is fine."),
        ),
        _reviewer_says(
            "arguments-as-object",
            "The server sends the arguments as a JSON object instead of a JSON string.",
            Turn(
                agent="reviewer",
                tool_calls=[
                    ScriptedToolCall(
                        name="review_code_block", arguments=ALL_CHECKS_PASS, as_object=True
                    )
                ],
            ),
        ),
        _reviewer_says(
            "call-as-plain-json",
            'The call is written in the text as {"name": ..., "parameters": ...} (Llama).',
            Turn(
                agent="reviewer",
                content=json.dumps({"name": "review_code_block", "parameters": ALL_CHECKS_PASS}),
            ),
        ),
        _reviewer_says(
            "tool-call-block",
            "The call is written in the text as a <tool_call> block (Hermes, Qwen).",
            Turn(agent="reviewer", content=f"<tool_call>\n{_TEXT_CALL}\n</tool_call>"),
        ),
        _reviewer_says(
            "parallel-identical-calls",
            "The reviewer makes the same call twice in parallel.",
            Turn(agent="reviewer", tool_calls=[_DISAGREEING[1], _DISAGREEING[1]]),
        ),
        _reviewer_says(
            "parallel-disagreeing-calls",
            "The reviewer makes two review calls that disagree; asked again, it makes one.",
            Turn(agent="reviewer", tool_calls=list(_DISAGREEING)),
            reviewer_turn(),
            extra_calls=1,
        ),
        _reviewer_says(
            "ollama-no-tools",
            'Ollama with a model without tools: HTTP 400 "... does not support tools".',
            Turn(agent="reviewer", tools=True, status=400, error_message=OLLAMA_NO_TOOLS),
            Turn(agent="reviewer", tools=False, content="APPROVE"),
            extra_calls=1,
        ),
        _reviewer_says(
            "vllm-named-choice-only",
            "vLLM without auto tool choice: only a named tool_choice is accepted.",
            reviewer_turn().model_copy(update={"tool_choice": "named"}),
        ),
        _reviewer_says(
            "forced-choice-rejected",
            "A server that rejects forced tool choices with HTTP 400 but makes calls on auto.",
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
            reviewer_turn().model_copy(update={"tool_choice": "auto"}),
            extra_calls=2,
        ),
        _reviewer_says(
            "forced-choice-empty",
            "LM Studio: a forced tool choice answered with empty content.",
            Turn(agent="reviewer", tool_choice="named", content=""),
            reviewer_turn().model_copy(update={"tool_choice": "auto"}),
            extra_calls=1,
        ),
        Persona(
            "empty-replies",
            "A local server answers the coder and the reviewer once with empty content.",
            coder=(coder_turn(""), coder_turn(COMPLIANT_CODER)),
            reviewer=(Turn(agent="reviewer", content=""), reviewer_turn()),
            extra_calls=2,
        ),
        Persona(
            "no-usage",
            "The server reports no token usage.",
            coder=(Turn(agent="coder", content=COMPLIANT_CODER, omit_usage=True),),
            reviewer=(reviewer_turn().model_copy(update={"omit_usage": True}),),
            admin=(admin_turn(COMPLIANT_ADMIN).model_copy(update={"omit_usage": True}),),
        ),
        Persona(
            "stalled-server",
            "A serial local server that answers long after the request timeout.",
            coder=(Turn(agent="coder", content=COMPLIANT_CODER, delay=5.0),),
            reviewer=(),
            admin=(),
            rescued=False,
            runs=0,
            stop_reason="error",
            cause="is slow: no answer within 1.0 s",
            exit_code=3,
            settings={"endpoint": {"timeout": 1}},
        ),
        _reviewer_says(
            "invalid-review-calls",
            "The review call's arguments cannot be repaired, attempt after attempt.",
            _review_call({**ALL_CHECKS_PASS, "is_python_code_block": "maybe"}, times=3),
            admin=(),
            rescued=False,
            runs=0,
            stop_reason="error",
            cause="did not make a valid call to review_code_block in 3 attempt(s)",
        ),
    )
)
