"""Conversations laid out for strict chat templates (Gemma, Mistral): the pure layout, and the
agent finding the form a server needs over real HTTP to the scripted server's strict mode."""

from __future__ import annotations

from typing import Any

import pytest

from sandcrew.agents import (
    ChatForm,
    ChatFormMemory,
    EmptyReplyError,
    ModelEndpoint,
    OpenAIChatAgent,
    TextMessage,
    ToolCall,
    ToolCallResult,
)
from sandcrew.agents._chat_format import alternates, in_form, to_chat_messages
from sandcrew.agents._messages import AggregateMessage
from sandcrew.errors import InfrastructureError
from sandcrew.testing import ScriptedModelServer, StrictTemplate, Turn
from sandcrew.testing._templates import ROLES_MUST_ALTERNATE

# The crew's coder request: its own introduction, then three others and the task.
CREW_HISTORY = [
    TextMessage(role="assistant", content="I write code", sender="coder"),
    TextMessage(role="assistant", content="I review code", sender="reviewer"),
    TextMessage(role="assistant", content="I run code", sender="runner"),
    TextMessage(role="user", content="What's 6 * 7?", sender="admin"),
]


def open_form(messages: list[Any], agent: str = "coder") -> list[dict[str, Any]]:
    return to_chat_messages(messages, agent_name=agent, system_message="You are the coder.")


def test_the_alternating_form_merges_senders_and_starts_with_user() -> None:
    laid_out = in_form(open_form(CREW_HISTORY), ChatForm.ALTERNATING, agent_name="coder")

    assert laid_out == [
        {"role": "system", "content": "You are the coder."},
        {
            "role": "user",
            "content": "coder: I write code\n\nreviewer: I review code\n\nrunner: I run code"
            "\n\nadmin: What's 6 * 7?",
        },
    ]
    assert not alternates(open_form(CREW_HISTORY))
    assert alternates(laid_out)
    assert StrictTemplate().objection({"messages": laid_out}) is None


def test_the_no_system_form_folds_the_instructions_into_the_first_user_turn() -> None:
    history = [*CREW_HISTORY, TextMessage(content="```python\nprint(42)\n```", sender="coder")]
    history.append(TextMessage(content="[RUNNER_RESULT]\n42", sender="runner"))

    laid_out = in_form(open_form(history), ChatForm.ALTERNATING_NO_SYSTEM, agent_name="coder")

    assert [m["role"] for m in laid_out] == ["user", "assistant", "user"]
    assert laid_out[0]["content"].startswith("You are the coder.\n\ncoder: I write code")
    assert laid_out[1]["content"] == "```python\nprint(42)\n```"
    assert laid_out[2]["content"] == "runner: [RUNNER_RESULT]\n42"
    assert StrictTemplate(system_role=False).objection({"messages": laid_out}) is None


def test_function_call_turns_stay_valid_as_text() -> None:
    call = ToolCall(id="c1", name="add", arguments='{"a": 1}')
    history = [
        TextMessage(role="user", content="add 1", sender="admin"),
        AggregateMessage(
            tool_calls=[call],
            results=[ToolCallResult(id="c1", name="add", content="2")],
            sender="coder",
        ),
        TextMessage(role="user", content="thanks", sender="admin"),
    ]
    assert not alternates(open_form(history))  # assistant tool call, then a tool turn

    laid_out = in_form(open_form(history), ChatForm.ALTERNATING, agent_name="coder")

    assert [m["role"] for m in laid_out] == ["system", "user", "assistant", "user"]
    assert laid_out[2]["content"] == 'Function calls: add({"a": 1})'
    assert laid_out[3]["content"] == "function result: 2\n\nadmin: thanks"
    assert all("tool_calls" not in message for message in laid_out)


def agent_on(server: ScriptedModelServer, **endpoint: Any) -> OpenAIChatAgent:
    settings = ModelEndpoint(
        base_url=server.base_url, api_key="k", model="scripted", retries=2, **endpoint
    )
    return OpenAIChatAgent("coder", endpoint=settings, system_message="You are the coder.")


@pytest.mark.parametrize(
    ("template", "form"),
    [
        (StrictTemplate(), ChatForm.ALTERNATING),
        (StrictTemplate(status=500), ChatForm.ALTERNATING),
        (StrictTemplate(system_role=False), ChatForm.ALTERNATING_NO_SYSTEM),
    ],
    ids=["alternation-400", "alternation-500", "no-system-400"],
)
async def test_a_refused_turn_structure_is_sent_again_in_the_form_it_needs_once(
    template: StrictTemplate, form: ChatForm
) -> None:
    with ScriptedModelServer(
        [Turn(agent="coder", content="42", times=2)], strict_template=template
    ) as server:
        agent = agent_on(server)
        first = await agent.generate_reply(CREW_HISTORY)
        second = await agent.generate_reply(CREW_HISTORY)

    statuses = [(r.status, r.template_objection is not None) for r in server.requests]
    # refused once (not retried, even as a 500), then accepted: the form is remembered
    assert statuses == [(template.status, True), (200, False), (200, False)]
    assert first.content == second.content == "42"
    assert f"sent it in the {form} form" in first.notes[0]
    assert second.notes == []
    assert agent.form_to_send() is form


async def test_agents_sharing_the_memory_find_the_form_once() -> None:
    memory = ChatFormMemory()
    with ScriptedModelServer(
        [Turn(content="ok", times=2)], strict_template=StrictTemplate()
    ) as server:
        endpoint = ModelEndpoint(base_url=server.base_url, api_key="k", model="scripted")
        coder, reviewer = (
            OpenAIChatAgent(name, endpoint=endpoint, chat_forms=memory)
            for name in ("coder", "reviewer")
        )
        await coder.generate_reply(CREW_HISTORY)
        await reviewer.generate_reply(CREW_HISTORY)

    assert [r.agent for r in server.requests] == ["coder", "coder", "reviewer"]
    assert memory.get("scripted") is ChatForm.ALTERNATING


async def test_empty_replies_to_a_non_alternating_request_lead_to_the_alternating_form() -> None:
    with ScriptedModelServer(
        [Turn(agent="coder", content="42")], strict_template=StrictTemplate(answer="empty")
    ) as server:
        agent = agent_on(server)
        reply = await agent.generate_reply(CREW_HISTORY)

    assert reply.content == "42"
    objections = [r.template_objection for r in server.requests]
    assert objections == [ROLES_MUST_ALTERNATE, ROLES_MUST_ALTERNATE, None]
    assert "sent it in the alternating form" in reply.notes[-1]


async def test_empty_in_every_form_says_what_was_tried() -> None:
    with ScriptedModelServer([Turn(content="", times=4)]) as server:
        agent = agent_on(server)
        with pytest.raises(EmptyReplyError) as raised:
            # empty twice in the open form, then twice in the alternating form
            await agent.generate_reply(CREW_HISTORY)

    message = str(raised.value)
    assert "returned an empty reply" in message
    assert "the open form came back empty twice" in message
    assert "the alternating form came back empty too" in message


async def test_a_forced_form_is_sent_from_the_first_request() -> None:
    with ScriptedModelServer(
        [Turn(content="42")], strict_template=StrictTemplate(system_role=False)
    ) as server:
        agent = agent_on(server, chat_form="alternating-no-system")
        await agent.generate_reply(CREW_HISTORY)

    assert [r.template_objection for r in server.requests] == [None]
    assert server.requests[0].messages[0]["role"] == "user"


async def test_a_forced_form_the_server_refuses_stops_with_the_fix() -> None:
    server = ScriptedModelServer(strict_template=StrictTemplate(), require_all_used=False)
    with server:
        agent = agent_on(server, chat_form="open")
        with pytest.raises(InfrastructureError) as raised:
            await agent.generate_reply(CREW_HISTORY)

    assert len(server.requests) == 1
    assert ROLES_MUST_ALTERNATE in str(raised.value)
    assert "chat_form is set to 'open': set it to 'auto'" in str(raised.value)


async def test_a_template_refusing_every_form_names_each_refusal() -> None:
    refusal = Turn(status=400, error_message=ROLES_MUST_ALTERNATE, times=3)
    with ScriptedModelServer([refusal]) as server:
        agent = agent_on(server)
        with pytest.raises(InfrastructureError) as raised:
            await agent.generate_reply(CREW_HISTORY)

    first_roles = [r.messages[0]["role"] for r in server.requests]
    assert first_roles == ["system", "system", "user"]  # open, alternating, no system
    message = str(raised.value)
    for form in ("open", "alternating", "alternating-no-system"):
        assert f"the {form} form was refused (HTTP 400: {ROLES_MUST_ALTERNATE})" in message
    assert "accepts none of them" in message
