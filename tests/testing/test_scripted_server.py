"""The scripted OpenAI-compatible server, driven by the real openai client over HTTP."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import openai
import pytest

from sandcrew.testing import (
    AGENT_HEADER,
    ScriptedModelServer,
    Turn,
    block_real_model_requests,
    load_script,
)


def client_for(server: ScriptedModelServer, max_retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test-key", max_retries=max_retries)


def ask(client: openai.OpenAI, text: str = "hi", agent: str | None = None, **extra: Any) -> Any:
    return client.chat.completions.create(
        model="m",
        messages=[
            {"role": "system", "content": "You are a tester.\nBe brief."},
            {"role": "user", "content": text},
        ],
        extra_headers={AGENT_HEADER: agent} if agent else None,
        **extra,
    )


def test_json_reply_with_usage_and_recorded_request() -> None:
    with ScriptedModelServer([Turn(agent="alice", content="hello there")]) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.base_url.endswith("/v1")
        completion = ask(client_for(server), "hi you", agent="alice")
    assert completion.choices[0].message.content == "hello there"
    assert completion.choices[0].finish_reason == "stop"
    # usage counts whitespace-separated words: prompt "You are a tester. Be brief." + "hi you"
    assert completion.usage.prompt_tokens == 8
    assert completion.usage.completion_tokens == 2
    assert completion.usage.total_tokens == 10
    (request,) = server.requests
    assert request.agent == "alice"
    assert request.body["model"] == "m"
    assert request.messages[-1] == {"role": "user", "content": "hi you"}
    assert server.requests_for("alice") == [request]
    assert server.requests_for("bob") == []


def test_tool_calls_in_json_reply() -> None:
    turn = Turn(
        tool_calls=[{"name": "add", "arguments": {"a": 1, "b": 2}}], usage={"prompt_tokens": 7}
    )
    with ScriptedModelServer([turn]) as server:
        completion = ask(client_for(server))
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "tool_calls"
    assert message.content is None
    (call,) = message.tool_calls
    assert call.function.name == "add"
    assert json.loads(call.function.arguments) == {"a": 1, "b": 2}
    assert call.id
    assert completion.usage.prompt_tokens == 7


def test_streaming_text_tool_calls_and_usage_chunk() -> None:
    turn = Turn(
        content="a long streamed answer that spans several chunks",
        tool_calls=[{"name": "lookup", "arguments": '{"q": "x"}', "id": "call_fixed"}],
    )
    with ScriptedModelServer([turn]) as server:
        stream = ask(client_for(server), stream=True, stream_options={"include_usage": True})
        chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "a long streamed answer that spans several chunks"
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 1
    deltas = [call for c in chunks if c.choices for call in (c.choices[0].delta.tool_calls or [])]
    assert deltas[0].id == "call_fixed"
    assert deltas[0].function.name == "lookup"
    assert "".join(d.function.arguments or "" for d in deltas) == '{"q": "x"}'
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finish == ["tool_calls"]
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == 10


def test_streaming_without_usage_has_no_usage_chunk() -> None:
    with ScriptedModelServer([Turn(content="hi there")]) as server:
        chunks = list(ask(client_for(server), stream=True))
    # The stream carries the answer and its finish reason ...
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "hi there"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    # ... and, without include_usage, no usage-only chunk and no usage anywhere.
    assert all(c.choices for c in chunks)
    assert all(c.usage is None for c in chunks)


def test_turns_are_matched_by_agent_system_contains_and_predicate() -> None:
    turns = [
        Turn(agent="bob", content="for bob"),
        Turn(system="tester", contains="second", content="second by system"),
        Turn(when=lambda body: body["messages"][-1]["content"] == "third", content="third"),
        Turn(agent="alice", content="for alice"),
    ]
    with ScriptedModelServer(turns) as server:
        client = client_for(server)
        # Turns are taken in order among those that match, so alice skips bob's turn.
        assert ask(client, "first", agent="alice").choices[0].message.content == "for alice"
        assert ask(client, "the second one").choices[0].message.content == "second by system"
        assert ask(client, "third").choices[0].message.content == "third"
        assert ask(client, "x", agent="bob").choices[0].message.content == "for bob"


def test_turn_with_times_answers_several_requests() -> None:
    with ScriptedModelServer([Turn(content="again", times=3)]) as server:
        client = client_for(server)
        replies = [ask(client).choices[0].message.content for _ in range(3)]
    assert replies == ["again"] * 3


def unexpected_then_expected(server: ScriptedModelServer) -> None:
    with pytest.raises(openai.InternalServerError) as raised:
        ask(client_for(server, max_retries=3), "hello", agent="mallory")
    assert "ScriptedModelServer" in str(raised.value)
    assert "agent='mallory'" in str(raised.value)
    ask(client_for(server), agent="alice")


def test_unexpected_request_gets_500_and_fails_the_block() -> None:
    server = ScriptedModelServer([Turn(agent="alice", content="only alice")])
    with pytest.raises(AssertionError, match="no scripted turn matches request #1"), server:
        unexpected_then_expected(server)
    # x-should-retry: false stops the client from retrying the unexpected request.
    assert len(server.requests) == 2
    assert server.requests[0].turn is None
    assert server.requests[0].status == 500


def test_unused_turns_fail_the_block() -> None:
    server = ScriptedModelServer([Turn(content="one"), Turn(agent="x", content="never asked")])
    unused = r"1 scripted turn\(s\) never requested.*never asked"
    with pytest.raises(AssertionError, match=unused), server:
        ask(client_for(server))


def test_unused_turns_allowed_when_not_required() -> None:
    with ScriptedModelServer([Turn(content="spare")], require_all_used=False) as server:
        pass
    assert server.unused_turns()[0].content == "spare"


def test_clear_failures_for_deliberate_unexpected_requests() -> None:
    with ScriptedModelServer() as server:
        with pytest.raises(openai.InternalServerError):
            ask(client_for(server))
        assert len(server.failures) == 1
        server.clear_failures()


def test_error_status_is_retried_by_the_client_then_succeeds() -> None:
    turns = [
        Turn(status=500, retry_after=0.01),
        Turn(status=429, retry_after=0.01),
        Turn(content="ok"),
    ]
    with ScriptedModelServer(turns) as server:
        completion = ask(client_for(server, max_retries=2))
    assert completion.choices[0].message.content == "ok"
    assert [r.status for r in server.requests] == [500, 429, 200]


def test_error_status_body_reaches_the_client() -> None:
    server = ScriptedModelServer([Turn(status=400, error_message="bad field")])
    with server, pytest.raises(openai.BadRequestError, match="bad field"):
        ask(client_for(server))


def test_raw_body_is_sent_as_is_with_its_content_type_and_status() -> None:
    page = "<html><body>Welcome to nginx!</body></html>"
    turns = [
        Turn(raw_body=page, content_type="text/html"),
        Turn(raw_body="Bad Gateway", status=502),
    ]
    with ScriptedModelServer(turns) as server:
        client = client_for(server)
        raw = client.chat.completions.with_raw_response.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
        assert (raw.http_response.status_code, raw.headers["content-type"]) == (200, "text/html")
        assert raw.http_response.text == page
        with pytest.raises(openai.InternalServerError) as raised:
            ask(client)
    assert raised.value.status_code == 502
    assert raised.value.response.headers["content-type"] == "text/plain"
    assert raised.value.response.text == "Bad Gateway"
    assert [r.status for r in server.requests] == [200, 502]


def test_content_type_without_raw_body_is_refused() -> None:
    with pytest.raises(ValueError, match="content_type only applies to raw_body"):
        Turn(content="hi", content_type="text/html")


def test_refusal_and_finish_reason() -> None:
    turns = [
        Turn(refusal="I can't", finish_reason="stop"),
        Turn(content="cut", finish_reason="content_filter"),
    ]
    with ScriptedModelServer(turns) as server:
        refused = ask(client_for(server))
        filtered = ask(client_for(server))
    assert refused.choices[0].message.refusal == "I can't"
    assert refused.choices[0].finish_reason == "stop"
    assert filtered.choices[0].finish_reason == "content_filter"


def test_models_listing_and_unknown_paths() -> None:
    with ScriptedModelServer() as server:
        client = client_for(server)
        assert [m.id for m in client.models.list()] == ["scripted"]
        with pytest.raises(openai.NotFoundError):
            client.embeddings.create(model="m", input="x")
        assert "unexpected POST /v1/embeddings" in server.failures[0]
        server.clear_failures()


def test_script_from_yaml_and_json_files(tmp_path: Path) -> None:
    yaml_file = tmp_path / "chat.yaml"
    yaml_file.write_text(
        "turns:\n"
        "  - agent: teacher\n"
        "    content: 'What is 2 + 3?'\n"
        "  - agent: student\n"
        "    tool_calls:\n"
        "      - name: answer\n"
        "        arguments: {value: 5}\n",
        encoding="utf-8",
    )
    json_file = tmp_path / "chat.json"
    json_file.write_text(json.dumps([{"content": "from json", "usage": {"prompt_tokens": 1}}]))

    with ScriptedModelServer.from_file(yaml_file) as server:
        client = client_for(server)
        assert ask(client, agent="teacher").choices[0].message.content == "What is 2 + 3?"
        call = ask(client, agent="student").choices[0].message.tool_calls[0]
        assert json.loads(call.function.arguments) == {"value": 5}
    (turn,) = load_script(json_file)
    assert turn.content == "from json"


def test_invalid_script_lists_every_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("- status: 200\n- times: 0\n- colour: red\n", encoding="utf-8")
    with pytest.raises(ValueError, match="invalid turns") as raised:
        load_script(bad)
    message = str(raised.value)
    assert "turn 0: status" in message
    assert "turn 1: times" in message
    assert "turn 2: colour" in message


def test_delay_longer_than_client_timeout_is_retried() -> None:
    turns = [Turn(content="slow", delay=1.0), Turn(content="fast")]
    with ScriptedModelServer(turns) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=1, timeout=0.2)
        assert ask(client).choices[0].message.content == "fast"
    assert len(server.requests) == 2


def test_block_real_model_requests_points_clients_at_a_closed_port() -> None:
    os.environ["OPENAI_API_KEY"] = "sk-real-looking"
    try:
        with block_real_model_requests() as blocked:
            assert "OPENAI_API_KEY" not in os.environ
            assert os.environ["OPENAI_BASE_URL"] == blocked
            port = int(blocked.rsplit(":", 1)[1].split("/")[0])
            with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
                probe.connect(("127.0.0.1", port))
            client = openai.OpenAI(api_key="k", max_retries=0)
            with pytest.raises(openai.APIConnectionError):
                ask(client)
        assert os.environ["OPENAI_API_KEY"] == "sk-real-looking"
    finally:
        os.environ.pop("OPENAI_API_KEY", None)


def test_plugin_fixtures(
    scripted_model_server: ScriptedModelServer, no_real_model_requests: str
) -> None:
    assert os.environ["OPENAI_BASE_URL"] == no_real_model_requests
    scripted_model_server.reply("from the fixture")
    assert ask(client_for(scripted_model_server)).choices[0].message.content == "from the fixture"
