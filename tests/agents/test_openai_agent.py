"""OpenAIChatAgent over real HTTP to the scripted server: requests, replies, errors, retries."""

from __future__ import annotations

import openai
import pytest

from sandcrew.agents import (
    AggregateMessage,
    EndpointTimeoutError,
    GenerateReplyOptions,
    ModelEndpoint,
    OpenAIChatAgent,
    TextMessage,
    ToolCall,
    ToolCallMessage,
    ToolCallResult,
    ToolResultMessage,
    Usage,
)
from sandcrew.errors import (
    ConfigurationError,
    InfrastructureError,
    ModelBehaviorError,
    UserError,
)
from sandcrew.testing import AGENT_HEADER, ScriptedModelServer, Turn, closed_loopback_url
from tests.agents.conftest import AgentFactory

TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


async def test_reply_records_usage_and_sender(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(agent="coder", content="print(1)", usage={"prompt_tokens": 9, "completion_tokens": 4})
    )
    coder = model_agent("coder", system_message="You write code.")

    reply = await coder.generate_reply([TextMessage(role="user", content="task", sender="user")])

    assert isinstance(reply, TextMessage)
    assert reply.content == "print(1)"
    assert reply.sender == "coder"
    assert reply.usage == Usage(prompt_tokens=9, completion_tokens=4, total_tokens=13)
    (request,) = scripted_model_server.requests
    assert request.headers[AGENT_HEADER.lower()] == "coder"


async def test_messages_are_converted_from_the_agents_point_of_view(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.reply("fine", agent="reviewer")
    reviewer = model_agent("reviewer", system_message="You review code.")
    call = ToolCall(id="call_1", name="review", arguments='{"ok": true}')
    history = [
        TextMessage(role="system", content="House rules."),
        TextMessage(role="user", content="What's 1+1?", sender="admin user"),
        TextMessage(content="```python\nprint(1+1)\n```", sender="coder"),
        AggregateMessage(
            tool_calls=[call],
            results=[ToolCallResult(id="call_1", name="review", content="approved")],
            sender="reviewer",
        ),
        TextMessage(content="I approved it.", sender="reviewer"),
        ToolCallMessage(tool_calls=[call], text="let me check", sender="coder"),
        ToolResultMessage(
            results=[ToolCallResult(id="x", name="run", content="2")], sender="runner"
        ),
    ]

    await reviewer.generate_reply(history)

    # the history brings its own system message, so the agent's is not added
    assert scripted_model_server.requests[0].messages == [
        {"role": "system", "content": "House rules."},
        {"role": "user", "content": "What's 1+1?", "name": "admin_user"},
        {"role": "user", "content": "```python\nprint(1+1)\n```", "name": "coder"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "review", "arguments": '{"ok": true}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "approved"},
        {"role": "assistant", "content": "I approved it."},
        {
            "role": "user",
            "content": 'let me check\nFunction calls: review({"ok": true})',
            "name": "coder",
        },
        {"role": "user", "content": "2", "name": "runner"},
    ]


async def test_system_message_goes_first_only_when_the_history_has_none(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(Turn(content="a"), Turn(content="b"))
    agent = model_agent("coder", system_message="You write code.")
    task = TextMessage(role="user", content="task", sender="user")

    await agent.generate_reply([task])
    await agent.generate_reply([task, TextMessage(role="system", content="Late rules.")])

    first, second = (request.messages for request in scripted_model_server.requests)
    assert first == [
        {"role": "system", "content": "You write code."},
        {"role": "user", "content": "task", "name": "user"},
    ]
    assert second == [
        {"role": "user", "content": "task", "name": "user"},
        {"role": "system", "content": "Late rules."},
    ]


async def test_settings_and_options_map_onto_the_request(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(Turn(content="a"), Turn(content="b"))
    agent = model_agent(
        "admin", temperature=0.4, max_tokens=50, stop=["END"], tools=[TOOL], tool_choice="auto"
    )

    await agent.generate_reply([])
    await agent.generate_reply(
        [],
        GenerateReplyOptions(
            temperature=0,
            max_tokens=128,
            stop_sequences=[":"],
            tool_choice="none",
            extra={"seed": 7},
        ),
    )

    first, second = (r.body for r in scripted_model_server.requests)
    assert first["model"] == "scripted-model"
    assert (first["temperature"], first["max_tokens"], first["stop"]) == (0.4, 50, ["END"])
    assert (first["tools"], first["tool_choice"]) == ([TOOL], "auto")
    assert (second["temperature"], second["max_tokens"], second["stop"]) == (0, 128, [":"])
    assert (second["tool_choice"], second["seed"]) == ("none", 7)


async def test_tool_calls_come_back_as_a_tool_call_message(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(content="calling", tool_calls=[{"name": "f", "arguments": {"x": 1}, "id": "c9"}])
    )
    reply = await model_agent("a", tools=[TOOL]).generate_reply([])
    assert isinstance(reply, ToolCallMessage)
    assert reply.tool_calls == [ToolCall(id="c9", name="f", arguments='{"x": 1}')]
    assert reply.text == "calling"
    assert reply.usage is not None


async def test_empty_reply_is_a_clear_model_behavior_error(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    # asked once more (empty replies from local servers are often flukes), then an error
    scripted_model_server.add(
        Turn(content="", finish_reason="length", usage={"prompt_tokens": 7}, times=2)
    )
    with pytest.raises(ModelBehaviorError, match="returned an empty reply 2 time") as raised:
        await model_agent("coder").generate_reply([])
    assert "finish_reason='length'" in str(raised.value)
    assert "'coder'" in str(raised.value)
    assert raised.value.usage == Usage(prompt_tokens=14, total_tokens=14)


async def test_an_empty_reply_is_asked_again_and_noted(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(content="", usage={"prompt_tokens": 7}), Turn(content="ok", usage={"prompt_tokens": 5})
    )
    reply = await model_agent("coder").generate_reply([])
    assert reply.content == "ok"
    assert reply.notes == [
        "coder gave an empty reply (content='', finish_reason='stop'); asked again"
    ]
    assert reply.usage == Usage(prompt_tokens=12, total_tokens=12)  # both replies counted


async def test_refusal_is_a_clear_model_behavior_error(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(Turn(refusal="I cannot help with that."))
    with pytest.raises(ModelBehaviorError, match=r"refused to answer: 'I cannot help with that\.'"):
        await model_agent("coder").generate_reply([])


async def test_retries_500_then_succeeds(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(status=500, retry_after=0.01), Turn(status=503, retry_after=0.01), Turn(content="ok")
    )
    reply = await model_agent("coder", retries=3).generate_reply([])
    assert reply.content == "ok"
    assert [r.status for r in scripted_model_server.requests] == [500, 503, 200]


async def test_exhausted_retries_are_a_retryable_infrastructure_error(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(status=429, retry_after=0.01, error_message="slow down", times=2)
    )
    with pytest.raises(InfrastructureError, match="kept failing after 2 attempt") as raised:
        await model_agent("coder", retries=1).generate_reply([])
    assert raised.value.code == "model_error"
    assert raised.value.retryable
    assert "HTTP 429" in str(raised.value)
    assert scripted_model_server.base_url in str(raised.value)


async def test_rejected_key_is_a_configuration_error(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(Turn(status=401, error_message="bad key"))
    with pytest.raises(ConfigurationError, match="rejected the API key"):
        await model_agent("coder").generate_reply([])


async def test_bad_request_is_not_retryable(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(Turn(status=400, error_message="unknown field"))
    with pytest.raises(InfrastructureError, match="rejected the request: HTTP 400") as raised:
        await model_agent("coder").generate_reply([])
    assert (raised.value.code, raised.value.retryable) == ("model_rejected", False)


PROXY_PAGE = "<html><head><title>Welcome</title></head><body>It works!</body></html>"


async def test_html_page_at_a_wrong_base_url_is_a_configuration_error(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(Turn(raw_body=PROXY_PAGE, content_type="text/html"))
    with pytest.raises(ConfigurationError) as raised:
        await model_agent("coder").generate_reply([])
    assert str(raised.value).startswith(
        f"{scripted_model_server.base_url}/ did not answer like an OpenAI-compatible endpoint "
        "(got a non-JSON body starting '<html><head><title>Welcome</title>"
    )
    assert "check base_url (it usually ends in /v1); agent 'coder'" in str(raised.value)


async def test_json_that_is_not_a_completion_is_a_configuration_error(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(Turn(raw_body='{"status": "ok"}', content_type="application/json"))
    with pytest.raises(ConfigurationError, match=r"\(got JSON without a 'choices' list\)"):
        await model_agent("coder").generate_reply([])


async def test_response_validation_error_is_a_configuration_error(
    scripted_model_server: ScriptedModelServer,
) -> None:
    scripted_model_server.add(Turn(raw_body=PROXY_PAGE, content_type="text/html"))
    client = openai.AsyncOpenAI(
        base_url=scripted_model_server.base_url,
        api_key="k",
        max_retries=0,
        _strict_response_validation=True,
    )
    agent = OpenAIChatAgent("coder", model="m", client=client)
    with pytest.raises(ConfigurationError) as raised:
        await agent.generate_reply([])
    await agent.aclose()
    message = str(raised.value)
    assert "did not answer like an OpenAI-compatible endpoint (got a response the openai " in (
        message
    )
    assert "Expected Content-Type response header to be `application/json`" in message
    assert isinstance(raised.value.__cause__, openai.APIResponseValidationError)


async def test_endpoint_down_is_a_readable_infrastructure_error() -> None:
    url = closed_loopback_url()
    endpoint = ModelEndpoint(model="m", base_url=url, api_key="k", retries=0)
    agent = OpenAIChatAgent("coder", endpoint=endpoint)
    with pytest.raises(InfrastructureError) as raised:
        await agent.generate_reply([])
    error = raised.value
    assert error.code == "model_unreachable"
    assert error.retryable
    assert f"the model endpoint {url}/ is down: it could not be reached" in str(error)
    assert "check that the server is running" in str(error)


async def test_a_timed_out_request_is_reported_slow_and_never_sent_again(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    # The server had the request: a serial local server would still be generating it.
    scripted_model_server.add(Turn(content="late", delay=1.0))
    agent = model_agent("coder", retries=2, timeout=0.2, max_tokens=100)
    with pytest.raises(EndpointTimeoutError) as raised:
        await agent.generate_reply([TextMessage(role="user", content="hello there", sender="user")])
    message = str(raised.value)
    assert "is slow: no answer within 0.2 s" in message
    assert "was not sent again" in message
    assert "--request-timeout" in message
    assert raised.value.code == "model_unreachable"
    assert len(scripted_model_server.requests) == 1
    # the abandoned request is counted: its prompt and the reply it may still be writing
    assert raised.value.usage.estimated
    assert raised.value.usage.completion_tokens == 100
    assert agent.token_meter.spent == raised.value.usage


def test_constructor_lists_every_problem() -> None:
    with pytest.raises(
        UserError, match=r"model must be a non-empty.*max_tokens must be >= 1"
    ) as raised:
        OpenAIChatAgent("a", model="", max_tokens=0, temperature=3)
    assert "temperature must be between 0 and 2 (got 3)" in str(raised.value)


def test_endpoint_lists_every_problem_in_one_error() -> None:
    with pytest.raises(ConfigurationError) as raised:
        ModelEndpoint(model="m", retries=-1, timeout=float("inf"), base_url="localhost:8080")
    message = str(raised.value)
    assert message.startswith("invalid model endpoint: ")
    assert "retries: Input should be greater than or equal to 0" in message
    assert "timeout: Input should be a finite number" in message
    assert "base_url must be an http:// or https:// URL" in message


def test_missing_api_key_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="no model configured: set OPENAI_API_KEY"):
        OpenAIChatAgent("a", model="m")
