"""GroupChat: orchestrator choice, validation, history, streaming, stop reasons and limits."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from sandcrew.agents import (
    CLEAR_MESSAGES,
    TERMINATE,
    BaseAgent,
    GenerateReplyOptions,
    Graph,
    GroupChat,
    GroupChatManager,
    Message,
    RolePlayOrchestrator,
    RoundRobinOrchestrator,
    StopReason,
    TextMessage,
    Transition,
    Usage,
    WorkflowOrchestrator,
    terminate_message,
)
from sandcrew.errors import InfrastructureError, UserError
from sandcrew.testing import ScriptedAgent, ScriptedModelServer, Turn
from tests.agents.conftest import AgentFactory


def said(sender: str, content: str, **fields: Any) -> TextMessage:
    return TextMessage(content=content, sender=sender, **fields)


def test_orchestrator_is_chosen_at_construction() -> None:
    a, b = ScriptedAgent("a"), ScriptedAgent("b")
    graph = Graph([Transition.create(a, b)])
    assert isinstance(GroupChat([a, b]).orchestrator, RoundRobinOrchestrator)
    assert isinstance(GroupChat([a, b], workflow=graph).orchestrator, WorkflowOrchestrator)
    role_play = GroupChat([a, b], admin=ScriptedAgent("admin"), workflow=graph).orchestrator
    assert isinstance(role_play, RolePlayOrchestrator)
    assert role_play.workflow is graph


def test_validation_lists_every_problem() -> None:
    a = ScriptedAgent("a")
    outsider = ScriptedAgent("outsider")

    class Nameless:
        name = ""

        async def generate_reply(
            self, messages: Sequence[Message], options: GenerateReplyOptions | None = None
        ) -> Message:
            raise NotImplementedError

    with pytest.raises(UserError) as raised:
        GroupChat(
            [a, ScriptedAgent("a"), Nameless()],
            workflow=Graph([Transition.create(a, outsider)]),
            token_budget=0,
            time_budget=-1,
            no_progress_repeats=1,
        )
    message = str(raised.value)
    assert "every member needs a name (members at positions [2] have none)" in message
    assert "member names must be unique (repeated: a)" in message
    assert "every agent in the workflow must be a member (not members: outsider)" in message
    assert "token_budget must be >= 1 (got 0)" in message
    assert "time_budget must be > 0 seconds (got -1)" in message
    assert "no_progress_repeats must be >= 2 or None (got 1)" in message
    with pytest.raises(UserError, match="at least one member"):
        GroupChat([])


async def test_round_robin_order_wraps_around_and_max_round_counts_replies() -> None:
    a = ScriptedAgent("a", ["a1", "a2"])
    b = ScriptedAgent("b", ["b1", "b2"])
    c = ScriptedAgent("c", ["c1"])
    chat = GroupChat([a, b, c])

    result = await chat.call([said("user", "start")], max_round=5)

    assert result.stop_reason is StopReason.NO_NEXT_SPEAKER  # 'user' is not a member
    assert result.new_messages == []
    result = await chat.call([said("c", "start")], max_round=5)
    assert [m.content for m in result.new_messages] == ["a1", "b1", "c1", "a2", "b2"]
    assert result.rounds == 5
    assert result.stop_reason is StopReason.MAX_ROUNDS
    assert result.detail == "reached the limit of 5 rounds (agent replies in this call)"
    assert [m.content for m in result.messages] == ["start", "a1", "b1", "c1", "a2", "b2"]


async def test_empty_history_starts_with_the_first_member() -> None:
    chat = GroupChat([ScriptedAgent("a", ["hello"]), ScriptedAgent("b")])
    result = await chat.call([], max_round=1)
    assert [m.sender for m in result.messages] == ["a"]


async def test_terminate_message_ends_the_chat() -> None:
    a = ScriptedAgent("a", ["working"])
    b = ScriptedAgent("b", [TextMessage(content=f"  {TERMINATE}\n")])
    result = await GroupChat([a, b]).call([said("b", "go")])
    assert result.stop_reason is StopReason.TERMINATED
    assert result.detail == "b sent the terminate message"
    assert result.last_message is not None
    assert result.last_message.sender == "b"


async def test_marker_mid_sentence_does_not_terminate() -> None:
    a = ScriptedAgent("a", [f"When done, say {TERMINATE} on its own.", "fine"])
    b = ScriptedAgent("b", ["ok"])
    result = await GroupChat([a, b]).call([said("b", "go")], max_round=3)
    assert result.stop_reason is StopReason.MAX_ROUNDS
    assert result.rounds == 3


async def test_clear_marker_drops_the_history_before_it_for_speakers() -> None:
    a = ScriptedAgent("a", ["secret plan", "after"])
    b = ScriptedAgent("b", [CLEAR_MESSAGES, "fresh start"])
    chat = GroupChat([a, b])
    chat.send_introduction("I am a", sender=a)

    result = await chat.call([said("b", "task")], max_round=4)

    # as in AutoGen.NET, speakers see the introductions and the clear message onward
    assert [m.content for m in a.received[1]] == ["I am a", CLEAR_MESSAGES]
    assert [m.content for m in b.received[1]] == ["I am a", CLEAR_MESSAGES, "after"]
    # the turn order still follows the clear message's sender
    assert [m.sender for m in result.new_messages] == ["a", "b", "a", "b"]
    # the transcript keeps everything
    assert [m.content for m in result.messages] == [
        "task",
        "secret plan",
        CLEAR_MESSAGES,
        "after",
        "fresh start",
    ]


async def test_workflow_continues_from_the_sender_of_a_clear_message() -> None:
    a = ScriptedAgent("a", ["after"])
    b = ScriptedAgent("b", [CLEAR_MESSAGES])
    graph = Graph([Transition.create(a, b), Transition.create(b, a)])

    result = await GroupChat([a, b], workflow=graph).call([said("a", "task")], max_round=2)

    assert [m.content for m in result.new_messages] == [CLEAR_MESSAGES, "after"]
    assert [[m.content for m in seen] for seen in a.received] == [[CLEAR_MESSAGES]]
    assert result.stop_reason is StopReason.MAX_ROUNDS


async def test_introductions_come_first_and_are_not_in_the_result() -> None:
    a = ScriptedAgent("a", ["hi"])
    chat = GroupChat([a, ScriptedAgent("b")])
    chat.send_introduction("I will write code", sender="a")
    result = await chat.call([said("b", "task")], max_round=1)
    first_seen = a.received[0][0]
    assert (first_seen.sender, first_seen.content, first_seen.role) == (
        "a",
        "I will write code",
        "user",
    )
    assert [m.content for m in result.messages] == ["task", "hi"]


async def test_send_yields_each_message_and_stops_early_when_the_caller_breaks() -> None:
    runner = ScriptedAgent(
        "runner", ["[RUNNER_RESULT]\nerror", "[RUNNER_RESULT]\n63245986", "never"]
    )
    coder = ScriptedAgent("coder", ["code", "fixed code", "unused"])
    stream = GroupChat([coder, runner]).send([said("runner", "task")], max_round=10)

    seen: list[str] = []
    async for message in stream:
        seen.append(message.content)
        if message.sender == "runner" and "63245986" in message.content:
            break

    assert seen == ["code", "[RUNNER_RESULT]\nerror", "fixed code", "[RUNNER_RESULT]\n63245986"]
    assert not stream.finished
    result = stream.result
    assert result.stop_reason is StopReason.CALLER_STOPPED
    assert result.rounds == 4
    # nothing ran after the break
    assert (runner.remaining, coder.remaining) == (1, 1)


async def test_send_result_after_full_iteration() -> None:
    stream = GroupChat(
        [ScriptedAgent("a", ["x"]), ScriptedAgent("b", [terminate_message("b")])]
    ).send([])
    messages = [m async for m in stream]
    assert len(messages) == 2
    assert stream.finished
    assert stream.result.stop_reason is StopReason.TERMINATED


async def test_token_budget_stops_the_chat() -> None:
    spend = Usage(prompt_tokens=40, completion_tokens=10, total_tokens=50)
    a = ScriptedAgent("a", [said("a", "one", usage=spend), said("a", "three", usage=spend)])
    b = ScriptedAgent("b", [said("b", "two", usage=spend)])

    result = await GroupChat([a, b], token_budget=120).call([said("b", "go")])

    assert [m.content for m in result.new_messages] == ["one", "two", "three"]
    assert result.stop_reason is StopReason.TOKEN_BUDGET
    assert result.usage.total_tokens == 150
    assert result.detail == "used 150 tokens; the budget is 120"


class SlowAgent(BaseAgent):
    def __init__(self, name: str, seconds: float) -> None:
        super().__init__(name)
        self.seconds = seconds
        self.cancelled = False

    async def generate_reply(
        self, messages: Sequence[Message], options: GenerateReplyOptions | None = None
    ) -> Message:
        try:
            await asyncio.sleep(self.seconds)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return TextMessage(content="slow answer")


async def test_time_budget_cancels_a_slow_reply() -> None:
    slow = SlowAgent("slow", seconds=5)
    chat = GroupChat([ScriptedAgent("fast", ["quick"]), slow], time_budget=0.2)

    result = await chat.call([said("slow", "go")])

    assert [m.content for m in result.new_messages] == ["quick"]
    assert result.stop_reason is StopReason.TIME_BUDGET
    assert "the time budget is 0.2 s (while speaker 'slow' worked)" in result.detail
    assert slow.cancelled  # it sleeps 5 s unless the budget cancels it


async def test_no_progress_guard_stops_the_same_reply_to_the_same_message() -> None:
    a = ScriptedAgent("a", ["same", "same", "same", "unused"])
    b = ScriptedAgent("b", ["again", "again", "again", "unused"])
    result = await GroupChat([a, b]).call([said("b", "go")])
    # a answers "go" once, then "again" twice; b answers "same" three times
    assert result.stop_reason is StopReason.NO_PROGRESS
    assert result.detail == "b sent the same reply 3 times to the same message: 'again'"
    assert result.rounds == 6

    # The same exchange with the guard off runs until the rounds are used up.
    c = ScriptedAgent("a", ["same"] * 8)
    d = ScriptedAgent("b", ["again"] * 8)
    unguarded = await GroupChat([c, d], no_progress_repeats=None).call(
        [said("b", "go")], max_round=8
    )
    assert unguarded.stop_reason is StopReason.MAX_ROUNDS
    assert unguarded.rounds == 8


async def test_no_progress_counts_repeats_that_are_not_in_a_row() -> None:
    a = ScriptedAgent("a", ["ping", "ping", "ping", "unused"])
    b = ScriptedAgent("b", ["pong", "other", "pong", "unused"])
    result = await GroupChat([a, b], no_progress_repeats=2).call([said("b", "pong")])
    # a: "ping" to "pong" (1), "ping" to "pong" (2) -> stop, although "ping" to "go" is between
    assert result.stop_reason is StopReason.NO_PROGRESS
    assert result.detail == "a sent the same reply 2 times to the same message: 'ping'"
    assert [m.content for m in result.new_messages] == ["ping", "pong", "ping"]


async def test_the_same_reply_to_different_messages_is_progress() -> None:
    approval = "The code looks good, please ask runner to run the code for you."
    coder = ScriptedAgent("coder", ["code v1", "code v2", "code v3"])
    reviewer = ScriptedAgent("reviewer", [approval, approval, approval])
    runner = ScriptedAgent("runner", ["error 1", "error 2", "63245986"])

    result = await GroupChat([coder, reviewer, runner]).call([said("runner", "task")], max_round=9)

    assert result.stop_reason is StopReason.MAX_ROUNDS
    assert result.rounds == 9
    assert result.last_message is not None
    assert result.last_message.content == "63245986"


class Verdict(BaseModel):
    approved: bool
    attempt: int


async def test_structured_data_is_part_of_the_reply() -> None:
    verdicts = [Verdict(approved=False, attempt=n) for n in range(3)]
    same_dicts = [{"b": 2, "a": 1}, {"a": 1, "b": 2}, {"b": 2, "a": 1}]
    checker = ScriptedAgent(
        "checker", [said("checker", "checked", data=data) for data in [*verdicts, *same_dicts]]
    )
    worker = ScriptedAgent("worker", ["work"] * 6)

    result = await GroupChat([checker, worker]).call([said("worker", "work")], max_round=12)

    # different verdicts are different replies; equal dicts are equal whatever the key order
    assert result.stop_reason is StopReason.NO_PROGRESS
    assert result.detail == "checker sent the same reply 3 times to the same message: 'checked'"
    assert result.rounds == 11
    assert worker.remaining == 1


async def test_speaker_error_ends_the_chat_with_the_error_recorded() -> None:
    result = await GroupChat([ScriptedAgent("a", ["fine"]), _Failing("b")]).call([said("b", "go")])
    assert result.stop_reason is StopReason.ERROR
    assert isinstance(result.error, InfrastructureError)
    assert result.detail == "speaker 'b' failed: endpoint down"
    assert [m.content for m in result.messages] == ["go", "fine"]


class _Failing(BaseAgent):
    async def generate_reply(
        self, messages: Sequence[Message], options: GenerateReplyOptions | None = None
    ) -> Message:
        raise InfrastructureError("endpoint down", code="model_unreachable", retryable=True)


async def test_bugs_in_agents_are_not_swallowed() -> None:
    with pytest.raises(AssertionError, match="no reply left"):
        await GroupChat([ScriptedAgent("a")]).call([])


async def test_model_error_from_the_scripted_server_ends_the_chat(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    # an empty reply is asked once more before it ends the chat
    scripted_model_server.add(Turn(agent="coder", content="", finish_reason="stop", times=2))
    chat = GroupChat([model_agent("coder"), ScriptedAgent("runner")])
    result = await chat.call([said("runner", "task")])
    assert result.stop_reason is StopReason.ERROR
    assert "speaker 'coder' failed" in result.detail
    assert "empty reply 2 time(s)" in result.detail
    assert "returned an empty reply" in result.detail


async def test_max_round_must_be_positive() -> None:
    with pytest.raises(UserError, match="max_round must be >= 1 \\(got 0\\)"):
        await GroupChat([ScriptedAgent("a")]).call([], max_round=0)


async def test_group_chat_manager_wraps_a_chat_as_an_agent() -> None:
    spend = Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2)
    search = ScriptedAgent("search", [said("search", "```bing\nresults\n```", usage=spend)])
    summarizer = ScriptedAgent("summarizer", [said("summarizer", "short summary", usage=spend)])
    manager = GroupChatManager(GroupChat([search, summarizer]), name="group", max_round=2)

    reply = await manager.generate_reply([said("summarizer", "How to deploy?")])

    assert reply.content == "short summary"
    assert reply.sender == "group"
    assert reply.usage == Usage(prompt_tokens=2, completion_tokens=2, total_tokens=4)
    assert manager.last_result is not None
    assert manager.last_result.stop_reason is StopReason.MAX_ROUNDS

    failing = GroupChatManager(GroupChat([_Failing("x")]))
    with pytest.raises(InfrastructureError, match="endpoint down"):
        await failing.generate_reply([])
