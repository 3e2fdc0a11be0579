"""The stop policy: every reason a chat stops, and completion signals as real models write them."""

from __future__ import annotations

import pytest

from sandcrew.agents import (
    CLEAR_MESSAGES,
    FinalAnswer,
    GroupChat,
    Message,
    StopReason,
    TextMessage,
    UnsignalledCompletion,
    final_answer,
    is_solved,
    read_completion,
    strip_reasoning,
)
from sandcrew.testing import ScriptedAgent, ScriptedModelServer, Turn
from tests.agents.conftest import AgentFactory

FENCED = "```python\ndef f():\n    return 1\n\nprint(f())\n```"


def said(sender: str, content: str = "...", **fields: object) -> TextMessage:
    return TextMessage(content=content, sender=sender, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("It is 63245986.\n[COMPLETE]", "It is 63245986."),
        ("63245986\n  [COMPLETE]  \n", "63245986"),
        ("The answer is 63245986. [COMPLETE]", "The answer is 63245986."),
        ("The answer is 63245986.\n**[COMPLETE]**", "The answer is 63245986."),
        ("The answer is 63245986.\n[COMPLETE].", "The answer is 63245986."),
        ("The answer is 63245986.\n[complete]", "The answer is 63245986."),
        ("The answer is 63245986.\n`[COMPLETE]`", "The answer is 63245986."),
        ("The answer is 63245986.\nCOMPLETE", "The answer is 63245986."),
        ("The answer is 63245986.\n**COMPLETE**!", "The answer is 63245986."),
        (
            "The answer is 63245986.\n[COMPLETE]\nLet me know if you need anything else!",
            "The answer is 63245986.",
        ),
        (
            f"The program:\n{FENCED}\nprints 63245986.\n[COMPLETE]",
            f"The program:\n{FENCED}\nprints 63245986.",
        ),
        ("<think>Is it done? [COMPLETE]?</think>\nIt is 63245986.\n[COMPLETE]", "It is 63245986."),
    ],
    ids=[
        "own-line",
        "padded",
        "same-line",
        "bold",
        "full-stop",
        "lower-case",
        "backticks",
        "no-brackets",
        "bold-no-brackets",
        "closing-remark",
        "code-before",
        "reasoning",
    ],
)
def test_signal_ending_the_prose_is_accepted(reply: str, answer: str) -> None:
    assert read_completion(reply) == answer


@pytest.mark.parametrize(
    "reply",
    [
        "I will write [COMPLETE] when it is done.",
        "[COMPLETE] is what I say at the end, not now.",
        "Please fix the code.",
        "The result is wrong, so I will not say [COMPLETE].",
        "Use this:\n```\n[COMPLETE]\n```",
        "[COMPLETE]\n```python\nprint(1)\n```",
        "The task is complete.",
        "<think>It prints 63245986. [COMPLETE]",
        "",
    ],
    ids=[
        "mid-text",
        "first-word",
        "no-signal",
        "quoted-in-a-sentence",
        "inside-code",
        "code-after",
        "word-in-a-sentence",
        "only-in-reasoning",
        "empty",
    ],
)
def test_signal_mentioned_or_in_code_is_refused(reply: str) -> None:
    assert read_completion(reply) is None


def test_answer_keeps_code_indentation() -> None:
    answer = read_completion(f"Here it is:\n{FENCED}\n[COMPLETE]")
    assert answer == f"Here it is:\n{FENCED}"
    assert "    return 1" in (answer or "")


@pytest.mark.parametrize(
    ("text", "visible"),
    [
        ("<think>plan</think>\nFrom coder", "From coder"),
        ("<THINK>\nlong\nplan\n</THINK>answer", "answer"),
        ("<think>never closed, cut by max_tokens", ""),
        ("reasoning whose opening tag the template wrote</think>\nanswer", "answer"),
        ("no reasoning at all\n", "no reasoning at all\n"),
    ],
    ids=["closed", "upper-case", "unclosed", "only-end-tag", "none"],
)
def test_reasoning_is_stripped(text: str, visible: str) -> None:
    assert strip_reasoning(text) == visible


def test_final_answer_and_solved_rule() -> None:
    done = TextMessage(content="x", terminate=True, data=FinalAnswer(answer="63245986"))
    assert final_answer(StopReason.TERMINATED, done) == "63245986"
    assert final_answer(StopReason.MAX_ROUNDS, done) is None
    assert is_solved(StopReason.TERMINATED, verified_results=1)
    assert not is_solved(StopReason.TERMINATED, verified_results=0)
    assert not is_solved(StopReason.NO_PROGRESS, verified_results=1)


async def test_a_speaker_that_returns_nothing_ends_the_chat_naming_it() -> None:
    class Silent(ScriptedAgent):
        async def generate_reply(self, messages: object, options: object = None) -> Message:
            return None  # type: ignore[return-value]

    chat = GroupChat([ScriptedAgent("a", ["hello"]), Silent("mute")])

    result = await chat.call([said("mute", "task")], max_round=5)

    assert result.stop_reason is StopReason.NO_REPLY
    assert result.detail == "speaker 'mute' returned nothing instead of a message"
    assert [m.sender for m in result.new_messages] == ["a"]


async def test_after_a_clear_message_a_model_never_gets_an_empty_request(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(Turn(agent="plain", content="fresh start"))
    clearer = ScriptedAgent("clearer", [CLEAR_MESSAGES])
    plain = model_agent("plain")  # no system message of its own

    await GroupChat([clearer, plain]).call([said("plain", "task")], max_round=2)

    (request,) = scripted_model_server.requests
    assert request.messages == [
        {"role": "user", "content": CLEAR_MESSAGES, "name": "clearer"},
    ]


async def test_reasoning_stays_in_the_transcript_but_not_in_the_context() -> None:
    thinker = ScriptedAgent("thinker", ["<think>secret plan</think>\nvisible answer"])
    reader = ScriptedAgent("reader", ["ok"])

    result = await GroupChat([thinker, reader]).call([said("reader", "task")], max_round=2)

    assert result.messages[1].content == "<think>secret plan</think>\nvisible answer"
    assert [m.content for m in reader.received[0]] == ["task", "visible answer"]


async def test_unsignalled_completion_stops_with_its_own_reason() -> None:
    def verified(message: Message) -> bool:
        return message.content == "ran: 63245986"

    runner = ScriptedAgent("runner", ["ran: 63245986", "ran: 63245986"])
    admin = ScriptedAgent("admin", ["It is 63245986.", "It is 63245986, as I said."])
    rule = UnsignalledCompletion(finisher="admin", verified=verified)

    result = await GroupChat([runner, admin], stop_rules=[rule]).call([said("admin", "go")])

    assert result.stop_reason is StopReason.NO_COMPLETION_SIGNAL
    assert result.rounds == 4
    assert "admin answered a successful result 2 times without a recognisable completion" in (
        result.detail
    )


async def test_context_overflow_is_a_stop_reason_not_a_retry(
    scripted_model_server: ScriptedModelServer, model_agent: AgentFactory
) -> None:
    scripted_model_server.add(
        Turn(
            agent="big",
            status=400,
            error_message="This model's maximum context length is 4096 tokens. However, you "
            "requested 5000 tokens.",
        )
    )

    result = await GroupChat([model_agent("big")]).call([said("big", "task")])

    assert result.stop_reason is StopReason.CONTEXT_OVERFLOW
    assert "speaker 'big'" in result.detail
    assert "maximum context length is 4096" in result.detail
    assert len(scripted_model_server.requests) == 1
