"""FunctionCallMiddleware over sandcrew.functions contracts, against the scripted server."""

from __future__ import annotations

import json

import pytest

from sandcrew.agents import (
    AggregateMessage,
    FunctionCallMiddleware,
    FunctionCallRequiredError,
    GenerateReplyOptions,
    MiddlewareAgent,
    TextMessage,
    ToolCall,
    ToolCallMessage,
    ToolCallResult,
    ToolResultMessage,
)
from sandcrew.errors import ModelBehaviorError, UserError
from sandcrew.functions import function
from sandcrew.testing import ScriptedAgent, ScriptedModelServer, Turn
from tests.agents.conftest import AgentFactory, review_code_block


@function
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


GOOD_ARGS = {"has_multiple_code_blocks": False, "is_print_result_to_console": True}
TASK = [TextMessage(role="user", content="```python\nprint(1)\n```", sender="coder")]
NAMED = {"type": "function", "function": {"name": "review_code_block"}}


def reviewer(model_agent: AgentFactory, *, required: bool) -> MiddlewareAgent:
    middleware = FunctionCallMiddleware([review_code_block], required=required)
    return model_agent("reviewer", system_message="You review code.").use(middleware)


async def test_valid_call_is_executed_and_aggregated(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(agent="reviewer", tool_calls=[{"name": "review_code_block", "arguments": GOOD_ARGS}])
    )
    agent = model_agent("reviewer").use(FunctionCallMiddleware([review_code_block]))

    reply = await agent.generate_reply(TASK)

    assert isinstance(reply, AggregateMessage)
    assert reply.sender == "reviewer"
    assert [r.content for r in reply.results] == ["The code looks good"]
    assert reply.results[0].ok
    assert reply.results[0].id == reply.tool_calls[0].id
    assert reply.usage is not None
    body = scripted_model_server.requests[0].body
    assert body["tools"] == [review_code_block.to_openai_tool()]
    assert "tool_choice" not in body  # the caller chose none; the model decides


async def test_text_reply_passes_through_when_not_required(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.reply("no tools needed")
    agent = model_agent("a").use(FunctionCallMiddleware([add]))
    reply = await agent.generate_reply(TASK)
    assert isinstance(reply, TextMessage)
    assert reply.content == "no tools needed"


async def test_invalid_arguments_go_back_as_a_failed_result_when_not_required(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(Turn(tool_calls=[{"name": "add", "arguments": '{"a": "one"}'}]))
    reply = await model_agent("a").use(FunctionCallMiddleware([add])).generate_reply(TASK)
    assert isinstance(reply, AggregateMessage)
    assert not reply.results[0].ok
    assert "missing required property" in reply.results[0].content
    assert len(scripted_model_server.requests) == 1


async def test_unknown_function_lists_the_available_ones(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(
            tool_calls=[
                {"name": "multiply", "arguments": {}},
                {"name": "add", "arguments": {"a": 1, "b": 2}},
            ]
        )
    )
    agent = model_agent("a").use(FunctionCallMiddleware([add, review_code_block]))
    reply = await agent.generate_reply(TASK)
    assert isinstance(reply, AggregateMessage)
    unknown, known = reply.results
    assert unknown.content == (
        "Function multiply is not available; available functions are: add, review_code_block"
    )
    assert not unknown.ok
    assert (known.content, known.ok) == ("3", True)


async def test_pending_tool_call_is_executed_without_calling_the_model() -> None:
    inner = ScriptedAgent("calculator", [])  # fails the test if the model were asked
    agent = inner.use(FunctionCallMiddleware([add]))
    pending = ToolCallMessage(
        tool_calls=[ToolCall(id="c1", name="add", arguments='{"a": 2, "b": 40}')], sender="planner"
    )

    reply = await agent.generate_reply([pending])

    assert reply == ToolResultMessage(
        results=[ToolCallResult(id="c1", name="add", content="42", ok=True)], sender="calculator"
    )
    assert inner.received == []


async def test_required_call_corrects_invalid_arguments_with_the_exact_errors(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(
            tool_calls=[
                {"name": "review_code_block", "arguments": {"has_multiple_code_blocks": "no"}}
            ],
            usage={"prompt_tokens": 10, "completion_tokens": 5},
        ),
        Turn(
            tool_calls=[{"name": "review_code_block", "arguments": GOOD_ARGS}],
            usage={"prompt_tokens": 20, "completion_tokens": 6},
        ),
    )
    agent = reviewer(model_agent, required=True)

    reply = await agent.generate_reply(TASK)

    assert isinstance(reply, AggregateMessage)
    assert reply.content == "The code looks good"
    first, second = scripted_model_server.requests
    # one required function: forced by name from the first attempt
    assert first.body["tool_choice"] == NAMED
    assert second.body["tool_choice"] == NAMED
    # the retry repeats the original messages and adds the exact validation errors
    assert second.messages[:-1] == first.messages
    feedback = second.messages[-1]
    assert feedback["role"] == "user"
    assert feedback["content"] == (
        "Your function call was not valid. Fix these problems and call again:\n"
        '- review_code_block({"has_multiple_code_blocks": "no"}): '
        "/has_multiple_code_blocks: 'no' is not of type 'boolean'; "
        "/is_print_result_to_console: missing required property"
    )
    # usage of both attempts is counted
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.total_tokens) == (30, 41)


async def test_required_call_gives_up_after_three_attempts_with_every_attempt(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(Turn(content="Looks fine to me!", times=3))
    agent = reviewer(model_agent, required=True)

    with pytest.raises(FunctionCallRequiredError) as raised:
        await agent.generate_reply(TASK)

    error = raised.value
    assert isinstance(error, ModelBehaviorError)
    assert len(error.attempts) == 3
    assert [a.reply.content for a in error.attempts] == ["Looks fine to me!"] * 3
    assert all(a.errors == ["You must call function review_code_block."] for a in error.attempts)
    assert "did not make a valid call to review_code_block in 3 attempt(s)" in str(error)
    choices = [r.body["tool_choice"] for r in scripted_model_server.requests]
    assert choices == [NAMED, NAMED, NAMED]
    last = scripted_model_server.requests[-1].messages[-1]
    assert last == {"role": "user", "content": "You must call function review_code_block."}


async def test_required_call_with_several_functions_escalates_to_required(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(content="hmm"), Turn(tool_calls=[{"name": "add", "arguments": {"a": 1, "b": 1}}])
    )
    agent = model_agent("a").use(FunctionCallMiddleware([add, review_code_block], required=True))
    reply = await agent.generate_reply(TASK)
    assert reply.content == "2"
    # The caller asked for nothing: the middleware itself escalates after the first miss.
    assert [r.body["tool_choice"] for r in scripted_model_server.requests] == [
        "auto",
        "required",
    ]
    assert scripted_model_server.requests[1].messages[-1]["content"] == (
        "You must call one of the functions: add, review_code_block."
    )


async def test_existing_tools_are_kept_alongside_the_middlewares(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.reply("ok")
    other = {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}
    agent = model_agent("a", tools=[other]).use(FunctionCallMiddleware([add]))
    await agent.generate_reply(TASK, GenerateReplyOptions(tools=[other]))
    names = [t["function"]["name"] for t in scripted_model_server.requests[0].body["tools"]]
    assert names == ["search", "add"]
    assert (
        json.loads(json.dumps(scripted_model_server.requests[0].body["tools"][1]))
        == add.to_openai_tool()
    )


def test_construction_lists_every_problem() -> None:
    with pytest.raises(UserError, match=r"repeated: add.*max_attempts must be >= 1"):
        FunctionCallMiddleware([add, add], max_attempts=0)
    with pytest.raises(UserError, match="functions must not be empty"):
        FunctionCallMiddleware([])
