"""Speaker selection: round robin, workflow graph, admin role play (seed 000/001)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from sandcrew.agents import (
    AmbiguousWorkflowError,
    Graph,
    GroupChat,
    Message,
    OrchestrationContext,
    Orchestrator,
    RolePlayOrchestrator,
    RoundRobinOrchestrator,
    StopReason,
    TextMessage,
    Transition,
    WorkflowOrchestrator,
)
from sandcrew.agents._orchestrators import parse_role_play_reply
from sandcrew.testing import ScriptedAgent, ScriptedModelServer, Turn
from tests.agents.conftest import AgentFactory


def said(sender: str, content: str = "...", **fields: Any) -> TextMessage:
    return TextMessage(content=content, sender=sender, **fields)


A, B, C = ScriptedAgent("a"), ScriptedAgent("b"), ScriptedAgent("c")


async def next_name(
    orchestrator: Orchestrator,
    history: Sequence[Message],
    members: Sequence[ScriptedAgent] = (A, B, C),
) -> str | None:
    speaker = await orchestrator.next_speaker(OrchestrationContext(members, history))
    return None if speaker is None else speaker.name


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        ([], "a"),
        ([said("a")], "b"),
        ([said("a"), said("b")], "c"),
        ([said("c")], "a"),
        ([said("b"), said("stranger")], None),
    ],
    ids=["empty-first", "next", "next-again", "wrap-around", "non-member-ends"],
)
async def test_round_robin(history: list[Message], expected: str | None) -> None:
    assert await next_name(RoundRobinOrchestrator(), history) == expected


class Verdict(BaseModel):
    approved: bool


async def approved(history: Sequence[Message]) -> bool:
    data = history[-1].data
    return isinstance(data, Verdict) and data.approved


async def rejected(history: Sequence[Message]) -> bool:
    return not await approved(history)


def review_graph() -> Graph:
    return Graph(
        [
            Transition.create(A, B),
            Transition.create(B, C, approved),
            Transition.create(B, A, rejected),
        ]
    )


async def test_graph_next_agents_reads_structured_data() -> None:
    graph = review_graph()
    assert [a.name for a in await graph.next_agents(A, [said("a")])] == ["b"]
    ok = [said("b", data=Verdict(approved=True))]
    assert [a.name for a in await graph.next_agents(B, ok)] == ["c"]
    assert [
        a.name for a in await graph.next_agents("b", [said("b", data=Verdict(approved=False))])
    ] == ["a"]
    assert await graph.next_agents(C, ok) == []
    assert graph.agent_names == ["a", "b", "c"]


async def test_sync_conditions_are_accepted() -> None:
    graph = Graph([Transition.create(A, B, lambda history: len(history) > 1)])
    assert await graph.next_agents(A, [said("a")]) == []
    assert await graph.next_agents(A, [said("x"), said("a")]) == [B]


async def test_workflow_zero_one_and_many_candidates() -> None:
    workflow = WorkflowOrchestrator(
        Graph([Transition.create(A, B), Transition.create(B, A), Transition.create(B, C)])
    )
    assert await next_name(workflow, []) is None
    assert await next_name(workflow, [said("c")]) is None  # no transition leaves c
    assert await next_name(workflow, [said("user")]) is None  # not a member
    assert await next_name(workflow, [said("a")]) == "b"
    with pytest.raises(AmbiguousWorkflowError, match=r"several next speakers after 'b' \(a, c\)"):
        await next_name(workflow, [said("b")])


async def test_workflow_chat_ends_without_next_speaker_and_reports_ambiguity() -> None:
    coder = ScriptedAgent("coder", ["code"])
    runner = ScriptedAgent("runner", ["[RUNNER_RESULT]\n42"])
    graph = Graph([Transition.create(coder, runner)])
    chat = GroupChat([coder, runner], workflow=graph)

    result = await chat.call([said("coder", "task")])

    assert [m.sender for m in result.new_messages] == ["runner"]
    assert result.stop_reason is StopReason.NO_NEXT_SPEAKER
    assert result.detail == "WorkflowOrchestrator found no next speaker after 'runner'"

    fork = GroupChat(
        [coder, runner, ScriptedAgent("admin")],
        workflow=Graph(
            [Transition.create(coder, runner), Transition.create(coder, chat.members[0])]
        ),
    )
    ambiguous = await fork.call([said("coder", "task")])
    assert ambiguous.stop_reason is StopReason.ERROR
    assert isinstance(ambiguous.error, AmbiguousWorkflowError)
    assert "(runner, coder)" in ambiguous.detail


EXPECTED_PROMPT = (
    "You are in a role play game. Carefully read the conversation history and carry on the "
    "conversation.\n"
    "The available roles are:\n"
    "coder,reviewer,runner\n"
    "\n"
    "Each message will start with 'From name:', e.g:\n"
    "From coder:\n"
    "//your message//."
)


async def test_role_play_prompt_and_history_rewrite_match_the_seed(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(Turn(agent="admin", content="From Reviewer"))
    admin = model_agent("admin", system_message="You are the admin.", temperature=0.7)
    coder = ScriptedAgent("coder")
    reviewer = ScriptedAgent("reviewer", ["looks good"])
    runner = ScriptedAgent("runner")
    chat = GroupChat([coder, reviewer, runner], admin=admin)
    chat.send_introduction("I will write code", sender=coder)

    result = await chat.call(
        [
            said("user", "What's the 39th fibonacci number?", role="user"),
            said("coder", "```python\nprint(1)\n```"),
        ],
        max_round=1,
    )

    assert [m.sender for m in result.new_messages] == ["reviewer"]
    (request,) = scripted_model_server.requests
    # the role-play prompt is the system message; the admin's own one is left out
    assert [m for m in request.messages if m["role"] == "system"] == [
        {"role": "system", "content": EXPECTED_PROMPT}
    ]
    assert request.messages == [
        {"role": "system", "content": EXPECTED_PROMPT},
        {"role": "user", "content": "From coder:\nI will write code\n<eof_msg>\nround # 0"},
        {
            "role": "user",
            "content": "From user:\nWhat's the 39th fibonacci number?\n<eof_msg>\nround # 1",
        },
        {"role": "user", "content": "From coder:\n```python\nprint(1)\n```\n<eof_msg>\nround # 2"},
    ]
    assert request.body["temperature"] == 0
    assert request.body["max_tokens"] == 128
    assert request.body["stop"] == [":"]
    assert "tools" not in request.body
    # the chosen speaker saw the introduction and the whole history
    assert [m.content for m in reviewer.received[0]] == [
        "I will write code",
        "What's the 39th fibonacci number?",
        "```python\nprint(1)\n```",
    ]


async def test_role_play_prompt_includes_agent_descriptions(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(Turn(agent="admin", content="From runner"))
    coder = ScriptedAgent("coder", description="writes Python code for the task")
    runner = ScriptedAgent("runner", ["ran"], description="runs the coder's code in a sandbox")
    chat = GroupChat([coder, runner], admin=model_agent("admin"))

    await chat.call([said("user", "go")], max_round=1)

    prompt = scripted_model_server.requests[0].messages[0]["content"]
    assert prompt == (
        "You are in a role play game. Carefully read the conversation history and carry on the "
        "conversation.\n"
        "The available roles are:\n"
        "coder,runner\n"
        "\n"
        "What each role does:\n"
        "coder: writes Python code for the task\n"
        "runner: runs the coder's code in a sandbox\n"
        "\n"
        "Each message will start with 'From name:', e.g:\n"
        "From coder:\n"
        "//your message//."
    )


async def test_role_play_retries_with_feedback_then_picks(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(agent="admin", content="From tester"), Turn(agent="admin", content="from CODER")
    )
    coder = ScriptedAgent("coder", ["code"])
    chat = GroupChat([coder, ScriptedAgent("runner")], admin=model_agent("admin"))

    result = await chat.call([said("user", "task")], max_round=1)

    assert result.new_messages[0].sender == "coder"
    retry = scripted_model_server.requests[1].messages
    assert retry[-2] == {"role": "assistant", "content": "From tester"}
    assert retry[-1]["content"] == (
        "'From tester' does not name exactly one of the available roles. "
        "Answer with 'From name:' where name is exactly one of: coder,runner"
    )
    # the admin's selection calls count towards the chat's usage
    assert result.usage.total_tokens > 0


async def test_role_play_falls_back_to_round_robin_after_three_bad_replies(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(agent="admin", content="From nobody", times=2),
        Turn(agent="admin", content="coder or runner, either is fine"),
    )
    coder, runner = ScriptedAgent("coder", ["code"]), ScriptedAgent("runner")
    chat = GroupChat([runner, coder], admin=model_agent("admin"))

    result = await chat.call([said("runner", "task")], max_round=1)

    # never an error: the member after the last sender speaks, and the result says why
    assert result.stop_reason is StopReason.MAX_ROUNDS
    assert [m.sender for m in result.new_messages] == ["coder"]
    assert len(result.notes) == 1
    assert result.notes[0].startswith("round 1: the admin 'admin' did not name exactly one")
    assert "'From nobody'" in result.notes[0]
    assert "'coder' speaks next by round robin" in result.notes[0]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("From coder:", "coder"),
        ("From coder.", "coder"),
        ("**From coder**", "coder"),
        ("coder", "coder"),
        ("  Coder  ", "coder"),
        ("The next speaker should be: From runner", "runner"),
        ("<think>The coder wrote code; the runner or the coder?</think>\nFrom runner", "runner"),
        ("From `runner`", "runner"),
        ("I think coder, then runner", None),
        ("From nobody", None),
        ("<think>coder should speak", None),
        ("decoder", None),
    ],
)
def test_role_play_reply_names_exactly_one_candidate(reply: str, expected: str | None) -> None:
    coder, runner = ScriptedAgent("coder"), ScriptedAgent("runner")
    chosen = parse_role_play_reply(reply, [coder, runner])
    assert (chosen.name if chosen is not None else None) == expected


async def test_a_reasoning_admin_gets_room_to_think(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    # The ':' stop sequence cuts a reasoning model off inside its <think> block.
    scripted_model_server.add(
        Turn(agent="admin", content="<think>\nThe last message is the task. Candidates"),
        Turn(agent="admin", content="<think>\nThe task needs code: coder.\n</think>\nFrom coder"),
        Turn(agent="admin", content="<think>\nCode written: run it.\n</think>\nFrom runner"),
    )
    coder, runner = ScriptedAgent("coder", ["code"]), ScriptedAgent("runner", ["ran"])
    chat = GroupChat([coder, runner], admin=model_agent("admin"))

    result = await chat.call([said("user", "task")], max_round=2)

    assert [m.sender for m in result.new_messages] == ["coder", "runner"]
    bodies = [request.body for request in scripted_model_server.requests]
    assert (bodies[0]["max_tokens"], bodies[0]["stop"]) == (128, [":"])
    for body in bodies[1:]:
        assert body["max_tokens"] >= 1024
        assert "stop" not in body


async def test_role_play_with_workflow_asks_admin_only_for_several_candidates(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(Turn(agent="admin", content="From coder"))
    coder = ScriptedAgent("coder", ["code v1", "code v2"])
    reviewer = ScriptedAgent("reviewer", ["comments", "more comments"])
    runner = ScriptedAgent("runner")
    admin = model_agent("admin")
    graph = Graph(
        [
            Transition.create(coder, reviewer),
            Transition.create(reviewer, coder),
            Transition.create(reviewer, runner),
        ]
    )
    chat = GroupChat([coder, reviewer, runner], admin=admin, workflow=graph)

    result = await chat.call([said("coder", "code v0")], max_round=3)

    # coder -> reviewer is the only transition: no admin call; reviewer -> {coder, runner}: ask
    assert [m.sender for m in result.new_messages] == ["reviewer", "coder", "reviewer"]
    assert len(scripted_model_server.requests) == 1
    prompt = scripted_model_server.requests[0].messages[0]["content"]
    assert "The available roles are:\ncoder,runner\n" in prompt
    assert result.stop_reason is StopReason.MAX_ROUNDS


async def test_role_play_single_member_needs_no_admin() -> None:
    solo = ScriptedAgent("solo", ["hi"])
    orchestrator = RolePlayOrchestrator(ScriptedAgent("admin"))
    assert await next_name(orchestrator, [], [solo]) == "solo"


async def test_an_empty_selection_reply_is_asked_again_not_an_error(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(agent="admin", content=""), Turn(agent="admin", content="From runner")
    )
    runner = ScriptedAgent("runner", ["ran"])
    chat = GroupChat([ScriptedAgent("coder"), runner], admin=model_agent("admin"))

    result = await chat.call([said("user", "task")], max_round=1)

    assert result.stop_reason is StopReason.MAX_ROUNDS
    assert [m.sender for m in result.new_messages] == ["runner"]
    assert len(scripted_model_server.requests) == 2
