"""What the scripted server replays of real endpoints: arguments as objects, missing usage,
answers that depend on the request's tools and tool_choice, and the named personas."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from sandcrew.testing import (
    AGENT_HEADER,
    ScriptedModelServer,
    ScriptedToolCall,
    Turn,
    load_script,
)

TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


def post(server: ScriptedModelServer, **body: Any) -> tuple[int, dict[str, Any]]:
    """The raw answer (status, JSON), as the wire carries it."""
    payload = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **body}
    request = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json", AGENT_HEADER: "a"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_arguments_can_be_sent_as_a_json_object() -> None:
    call = ScriptedToolCall(name="f", arguments={"x": True}, as_object=True)
    with ScriptedModelServer([Turn(tool_calls=[call])]) as server:
        _, answer = post(server)
    assert answer["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == {"x": True}


def test_usage_can_be_left_out() -> None:
    with ScriptedModelServer([Turn(content="ok", omit_usage=True)]) as server:
        _, answer = post(server)
    assert "usage" not in answer


@pytest.mark.parametrize(
    ("body", "form"),
    [
        ({}, "absent"),
        ({"tools": [TOOL], "tool_choice": "auto"}, "auto"),
        ({"tools": [TOOL], "tool_choice": "required"}, "required"),
        (
            {"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "f"}}},
            "named",
        ),
    ],
)
def test_turns_match_on_the_tool_choice_form(body: dict[str, Any], form: str) -> None:
    forms = ["absent", "auto", "required", "named"]
    turns = [Turn(tool_choice=name, content=name) for name in forms]  # type: ignore[arg-type]
    with ScriptedModelServer(turns, require_all_used=False) as server:
        _, answer = post(server, **body)
    assert answer["choices"][0]["message"]["content"] == form


def test_turns_match_on_whether_tools_are_offered() -> None:
    turns = [
        Turn(tools=True, status=400, error_message="does not support tools"),
        Turn(tools=False, content="text"),
    ]
    with ScriptedModelServer(turns) as server:
        assert post(server, tools=[TOOL])[0] == 400
        assert post(server)[1]["choices"][0]["message"]["content"] == "text"


def test_matchers_load_from_script_files() -> None:
    [turn] = load_script([{"tools": True, "tool_choice": "named", "content": "x"}])
    assert (turn.tools, turn.tool_choice) == (True, "named")
    assert "tool_choice='named'" in turn.describe()
