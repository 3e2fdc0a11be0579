"""How real endpoints answer, replayed by the scripted server over real HTTP: loose tool
calls, servers without (some) tool support, empty replies, missing usage, token budgets."""

from __future__ import annotations

import json

import pytest

from sandcrew.agents import (
    AggregateMessage,
    EmptyReplyError,
    FunctionCallMiddleware,
    FunctionCallRequiredError,
    GenerateReplyOptions,
    MiddlewareAgent,
    TextMessage,
    TokenBudgetExhaustedError,
    TokenMeter,
    ToolCallMessage,
    ToolsUnsupportedError,
    estimate_tokens,
)
from sandcrew.agents._tokens import estimate_prompt_tokens
from sandcrew.errors import InfrastructureError
from sandcrew.testing import ScriptedModelServer, ScriptedToolCall, Turn
from tests.agents.conftest import AgentFactory, review_code_block

GOOD_ARGS = {"has_multiple_code_blocks": False, "is_print_result_to_console": True}
BAD_ARGS = {"has_multiple_code_blocks": True, "is_print_result_to_console": True}
TASK = [TextMessage(role="user", content="```python\nprint(1)\n```", sender="coder")]
NAMED = {"type": "function", "function": {"name": "review_code_block"}}


def reviewer(model_agent: AgentFactory, **settings: object) -> MiddlewareAgent:
    middleware = FunctionCallMiddleware([review_code_block], required=True)
    return model_agent("reviewer", **settings).use(middleware)


def choices(server: ScriptedModelServer) -> list[object]:
    return [request.body.get("tool_choice", "absent") for request in server.requests]


# --- loose calls ------------------------------------------------------------------------------


async def test_arguments_sent_as_a_json_object_are_accepted_and_noted(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(
            tool_calls=[
                ScriptedToolCall(name="review_code_block", arguments=GOOD_ARGS, as_object=True)
            ]
        )
    )
    reply = await reviewer(model_agent).generate_reply(TASK)
    assert isinstance(reply, AggregateMessage)
    assert reply.content == "The code looks good"
    assert json.loads(reply.tool_calls[0].arguments) == GOOD_ARGS
    assert reply.notes == [
        "the server sent the arguments of review_code_block as a JSON value, not as a JSON string"
    ]


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(
            f"<tool_call>\n{json.dumps({'name': 'review_code_block', 'arguments': GOOD_ARGS})}\n"
            "</tool_call>",
            id="tool-call-block",
        ),
        pytest.param(
            json.dumps({"name": "review_code_block", "parameters": GOOD_ARGS}), id="llama-json"
        ),
        pytest.param(
            "```json\n"
            + json.dumps({"name": "review_code_block", "arguments": GOOD_ARGS})
            + "\n```",
            id="fenced-json",
        ),
        pytest.param(
            "<think>The code prints.</think>\n<tool_call>"
            + json.dumps({"name": "review_code_block", "arguments": json.dumps(GOOD_ARGS)}),
            id="unclosed-block-after-thinking",
        ),
    ],
)
async def test_a_call_written_in_the_text_is_read_as_a_call(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory, content: str
) -> None:
    scripted_model_server.add(Turn(content=content))
    reply = await reviewer(model_agent).generate_reply(TASK)
    assert isinstance(reply, AggregateMessage)
    assert reply.content == "The code looks good"
    assert any("from the reply's text" in note for note in reply.notes)
    assert len(scripted_model_server.requests) == 1


async def test_text_naming_a_function_that_was_not_offered_stays_text(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    text = json.dumps({"name": "delete_everything", "arguments": {}})
    scripted_model_server.add(Turn(content=text))
    agent = model_agent("a").use(FunctionCallMiddleware([review_code_block]))
    reply = await agent.generate_reply(TASK)
    assert isinstance(reply, TextMessage)
    assert reply.content == text


async def test_loose_arguments_are_repaired_and_the_call_records_what_was_used(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    loose = (
        '```json\n{"has_multiple_code_blocks": "false", "is_print_result_to_console": true, '
        '"lang": "py"}\n```'
    )
    scripted_model_server.add(
        Turn(tool_calls=[ScriptedToolCall(name="review_code_block", arguments=loose)])
    )
    reply = await reviewer(model_agent).generate_reply(TASK)
    assert isinstance(reply, AggregateMessage)
    assert reply.content == "The code looks good"
    assert json.loads(reply.tool_calls[0].arguments) == GOOD_ARGS
    assert reply.notes == [
        "repaired the call to review_code_block: took the arguments out of a code fence; "
        "read has_multiple_code_blocks=\"false\" as false; dropped the unknown argument 'lang'"
    ]
    assert len(scripted_model_server.requests) == 1


async def test_identical_parallel_calls_count_once(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    call = ScriptedToolCall(name="review_code_block", arguments=GOOD_ARGS)
    scripted_model_server.add(Turn(tool_calls=[call, call]))
    reply = await reviewer(model_agent).generate_reply(TASK)
    assert isinstance(reply, AggregateMessage)
    assert len(reply.tool_calls) == 1
    assert "dropped a repeated identical call to review_code_block" in reply.notes


async def test_disagreeing_parallel_calls_are_ambiguous_and_asked_again(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(
            tool_calls=[
                ScriptedToolCall(name="review_code_block", arguments=BAD_ARGS),
                ScriptedToolCall(name="review_code_block", arguments=GOOD_ARGS),
            ]
        ),
        Turn(tool_calls=[ScriptedToolCall(name="review_code_block", arguments=GOOD_ARGS)]),
    )
    reply = await reviewer(model_agent).generate_reply(TASK)
    assert isinstance(reply, AggregateMessage)
    assert len(reply.tool_calls) == 1
    assert reply.content == "The code looks good"
    feedback = scripted_model_server.requests[1].messages[-1]["content"]
    assert feedback.startswith("Your calls disagree: review_code_block: called 2 times")
    assert feedback.endswith("Make exactly one call with your final answer.")
    assert any("ambiguous" in note for note in reply.notes)


# --- empty replies ----------------------------------------------------------------------------


async def test_an_empty_reply_is_no_call_inside_the_retry_loop(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(content=""),
        Turn(tool_calls=[ScriptedToolCall(name="review_code_block", arguments=GOOD_ARGS)]),
    )
    reply = await reviewer(model_agent).generate_reply(TASK)
    assert isinstance(reply, AggregateMessage)
    # forced by name from the first attempt; an empty answer to it is followed by "auto"
    assert choices(scripted_model_server) == [NAMED, "auto"]
    assert reply.notes[0] == "attempt 1: empty reply (tool_choice forcing review_code_block)"
    assert scripted_model_server.requests[1].messages[-1]["content"] == (
        "You must call function review_code_block."
    )


async def test_empty_replies_only_exhaust_the_attempts_with_a_clear_error(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(Turn(content="", times=3))
    with pytest.raises(FunctionCallRequiredError) as raised:
        # (in the open form only: otherwise the last empty reply leads to the alternating one)
        await reviewer(model_agent, chat_form="open").generate_reply(TASK)
    assert raised.value.made_no_call
    assert "attempt 1: empty reply" in str(raised.value)
    assert choices(scripted_model_server) == [NAMED, "auto", NAMED]
    assert raised.value.usage is not None
    assert raised.value.usage.total_tokens > 0


# --- servers without (some) tool support ------------------------------------------------------


async def test_a_server_rejecting_auto_gets_the_named_choice_and_it_is_remembered(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    vllm_message = (
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    )
    call = ScriptedToolCall(name="review_code_block", arguments=GOOD_ARGS)
    scripted_model_server.add(
        Turn(tool_choice="auto", status=400, error_message=vllm_message),
        Turn(tool_choice="named", tool_calls=[call], times=2),
    )
    agent = model_agent("a").use(FunctionCallMiddleware([review_code_block]))
    auto = GenerateReplyOptions(tool_choice="auto")
    first = await agent.generate_reply(TASK, auto)
    second = await agent.generate_reply(TASK, auto)
    assert isinstance(first, AggregateMessage)
    assert isinstance(second, AggregateMessage)
    assert choices(scripted_model_server) == ["auto", NAMED, NAMED]
    assert first.notes == [
        f"the endpoint rejected tool_choice 'auto' (HTTP 400: {vllm_message}); "
        "sent named 'review_code_block' instead"
    ]
    assert second.notes == []  # remembered: no rejected request the second time


async def test_a_server_rejecting_forced_choices_gets_auto(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    call = ScriptedToolCall(name="review_code_block", arguments=GOOD_ARGS)
    scripted_model_server.add(
        Turn(tool_choice="named", status=400, error_message="tool_choice must be auto or none"),
        Turn(tool_choice="required", status=400, error_message="tool_choice must be auto or none"),
        Turn(tool_choice="auto", tool_calls=[call]),
    )
    reply = await reviewer(model_agent).generate_reply(TASK)
    assert isinstance(reply, AggregateMessage)
    assert choices(scripted_model_server) == [NAMED, "required", "auto"]
    assert "sent 'auto' instead" in reply.notes[0]


async def test_a_model_without_tools_is_told_once_and_never_offered_tools_again(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    ollama = "registry.ollama.ai/library/gemma:2b does not support tools"
    scripted_model_server.add(Turn(tools=True, status=400, error_message=ollama))
    agent = reviewer(model_agent)
    with pytest.raises(ToolsUnsupportedError, match="does not support tools"):
        await agent.generate_reply(TASK)
    with pytest.raises(ToolsUnsupportedError, match="cannot be offered tools"):
        await agent.generate_reply(TASK)
    assert len(scripted_model_server.requests) == 1


@pytest.mark.parametrize(
    "message",
    [
        "temperature out of range",
        "This model's maximum context length is 4096 tokens; the messages and tools use 5000",
    ],
)
async def test_an_unrelated_bad_request_is_not_mistaken_for_tool_trouble(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory, message: str
) -> None:
    scripted_model_server.add(Turn(status=400, error_message=message))
    with pytest.raises(InfrastructureError, match=r"HTTP 400: .*(out of range|context length)"):
        await reviewer(model_agent).generate_reply(TASK)
    assert len(scripted_model_server.requests) == 1


# --- usage and the token budget ---------------------------------------------------------------


async def test_missing_usage_is_estimated_and_marked(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(Turn(content="The answer is 63245986.", omit_usage=True))
    reply = await model_agent("coder", system_message="You write code.").generate_reply(TASK)
    assert reply.usage is not None
    assert reply.usage.estimated
    assert reply.usage.completion_tokens == estimate_tokens("The answer is 63245986.")
    assert reply.usage.prompt_tokens > 0
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


async def test_reported_usage_is_not_marked_estimated(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(Turn(content="ok"))
    reply = await model_agent("coder").generate_reply(TASK)
    assert reply.usage is not None
    assert not reply.usage.estimated


async def test_every_request_carries_max_tokens_within_what_is_left(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(content="one", usage={"prompt_tokens": 60, "completion_tokens": 10}),
        Turn(content="two", usage={"prompt_tokens": 25, "completion_tokens": 5}),
    )
    meter = TokenMeter(100)
    coder = model_agent("coder", token_meter=meter, max_tokens=50)
    admin = model_agent("admin", token_meter=meter)
    await coder.generate_reply(TASK)
    await admin.generate_reply(TASK)
    first, second = scripted_model_server.requests
    # 30 tokens are left for the admin's request: its prompt (estimated) first, then the reply.
    assert [first.body["max_tokens"], second.body["max_tokens"]] == [
        50,
        30 - estimate_prompt_tokens(second.body),
    ]
    assert meter.spent.total_tokens == 100
    with pytest.raises(TokenBudgetExhaustedError, match="token budget of 100 is used up"):
        await coder.generate_reply(TASK)
    assert len(scripted_model_server.requests) == 2


async def test_tokens_of_a_reply_that_ends_in_an_error_are_counted(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(Turn(content="", usage={"prompt_tokens": 40}, times=2))
    meter = TokenMeter(1000)
    with pytest.raises(EmptyReplyError, match="empty reply"):
        await model_agent("coder", token_meter=meter, chat_form="open").generate_reply(TASK)
    assert meter.spent.total_tokens == 80


async def test_a_text_reply_is_not_read_as_a_call_when_no_tools_were_offered(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    text = json.dumps({"name": "review_code_block", "arguments": GOOD_ARGS})
    scripted_model_server.add(Turn(content=text))
    reply = await model_agent("coder").generate_reply(TASK)
    assert not isinstance(reply, ToolCallMessage)
    assert reply.content == text


# --- watching model calls ---------------------------------------------------------------------


class _Watcher:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def call_started(self, agent: str, model: str) -> None:
        self.events.append(("started", agent, model))

    def call_ended(self, agent: str, model: str) -> None:
        self.events.append(("ended", agent, model))


async def test_a_watcher_sees_each_call_start_and_end_even_when_it_fails(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(content="", times=2),  # an empty reply asked again: still one call
        Turn(status=500, error_message="overloaded"),
    )
    watcher = _Watcher()
    agent = model_agent("coder", model="small-model", retries=0, watcher=watcher, chat_form="open")

    with pytest.raises(EmptyReplyError):
        await agent.generate_reply(TASK)
    with pytest.raises(InfrastructureError, match="500"):
        await agent.generate_reply(TASK)

    assert len(scripted_model_server.requests) == 3
    one_call = [("started", "coder", "small-model"), ("ended", "coder", "small-model")]
    assert watcher.events == one_call * 2
