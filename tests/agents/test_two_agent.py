"""Two-agent chats (seed 002) and sending to a GroupChatManager (seed 001)."""

from __future__ import annotations

from collections.abc import Sequence

from sandcrew.agents import (
    TERMINATE,
    Agent,
    GenerateReplyOptions,
    GroupChat,
    GroupChatManager,
    HumanInputMode,
    Message,
    PrintMessageMiddleware,
    StopReason,
    UserProxyAgent,
    initiate_chat,
    is_terminate,
    send,
    terminate_message,
)
from sandcrew.testing import ScriptedAgent, ScriptedModelServer, Turn
from tests.agents.conftest import AgentFactory

TEACHER_PROMPT = (
    "You are a teacher that create pre-school math question for student and check answer.\n"
    "If the answer is correct, you stop the conversation by saying [COMPLETE].\n"
    "If the answer is wrong, you ask student to fix it."
)


async def complete_means_terminate(
    messages: Sequence[Message], options: GenerateReplyOptions, agent: Agent
) -> Message:
    """Seed 002's recommended pattern: a plain word from the model becomes a hard terminate."""
    reply = await agent.generate_reply(messages, options)
    if "complete" in reply.content.lower():
        return terminate_message(reply.sender, usage=reply.usage)
    return reply


async def test_teacher_and_student_end_with_the_terminate_message(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(
            agent="teacher", content="Of course! Here's a math question for you:\n\nWhat is 2 + 3?"
        ),
        Turn(agent="student", content="The sum of 2 and 3 is 5."),
        Turn(agent="teacher", content="Correct! [COMPLETE]"),
    )
    teacher = (
        model_agent("teacher", system_message=TEACHER_PROMPT)
        .use(complete_means_terminate)
        .use(PrintMessageMiddleware(enabled=False))
    )
    student = model_agent(
        "student", system_message="You are a student that answer question from teacher"
    )

    result = await initiate_chat(
        student, teacher, "Hey teacher, please create math question for me.", max_round=10
    )

    conversation = result.messages
    assert len(conversation) < 10
    assert is_terminate(conversation[-1])
    assert conversation[-1].content == TERMINATE
    assert [m.sender for m in conversation] == ["student", "teacher", "student", "teacher"]
    assert result.stop_reason is StopReason.TERMINATED
    assert result.usage.total_tokens > 0
    # what the student's model saw: the teacher's question as a user message from "teacher"
    student_request = scripted_model_server.requests_for("student")[0]
    assert student_request.messages == [
        {"role": "system", "content": "You are a student that answer question from teacher"},
        {"role": "assistant", "content": "Hey teacher, please create math question for me."},
        {
            "role": "user",
            "content": "Of course! Here's a math question for you:\n\nWhat is 2 + 3?",
            "name": "teacher",
        },
    ]


async def test_two_agent_send_streams_and_respects_max_round() -> None:
    a = ScriptedAgent("a", ["a1", "a2"])
    b = ScriptedAgent("b", ["b1", "b2"])
    stream = send(a, b, "hello", max_round=3)
    contents = [m.content async for m in stream]
    assert contents == ["b1", "a1", "b2"]
    assert stream.result.stop_reason is StopReason.MAX_ROUNDS
    assert [m.content for m in stream.result.messages] == ["hello", "b1", "a1", "b2"]
    assert stream.result.messages[0].sender == "a"
    assert stream.result.messages[0].role == "user"


async def test_initiate_chat_with_a_group_chat_manager_uses_its_chat() -> None:
    answers = iter(["exit"])
    user = UserProxyAgent(
        "user",
        human_input_mode=HumanInputMode.ALWAYS,
        input_fn=lambda: next(answers),
        output_fn=lambda _: None,
    )
    search = ScriptedAgent("bing-search", ["```bing\nresult\n```"])
    summarizer = ScriptedAgent("summarizer", ["use the portal"])
    manager = GroupChatManager(GroupChat([user, search, summarizer]))

    result = await initiate_chat(
        user, manager, "How to deploy an openai resource on azure", max_round=10
    )

    assert [m.sender for m in result.messages] == ["user", "bing-search", "summarizer", "user"]
    assert result.stop_reason is StopReason.TERMINATED
    assert [m.content for m in result.messages][1:3] == ["```bing\nresult\n```", "use the portal"]
