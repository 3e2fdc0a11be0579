"""UserProxyAgent and human input modes (seed 003), with injected input and output."""

from __future__ import annotations

from collections.abc import Sequence

from sandcrew.agents import (
    HUMAN_INPUT_PROMPT,
    TERMINATE,
    HumanInputMode,
    Message,
    StopReason,
    TextMessage,
    UserProxyAgent,
    initiate_chat,
    is_terminate,
    terminate_message,
)
from sandcrew.testing import ScriptedAgent


class Person:
    """Answers from a list and records the prompts shown to it."""

    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def show(self, text: str) -> None:
        self.prompts.append(text)

    def answer(self) -> str | None:
        return self.answers.pop(0)


HELLO: Sequence[Message] = [TextMessage(role="user", content="hello", sender="assistant")]


def test_prompt_text_matches_autogen() -> None:
    assert HUMAN_INPUT_PROMPT == (
        "Please give feedback: Press enter or type 'exit' to stop the conversation."
    )


async def test_always_asks_and_replies_with_the_input() -> None:
    person = Person("five")
    user = UserProxyAgent("user", input_fn=person.answer, output_fn=person.show)
    assert user.human_input_mode is HumanInputMode.ALWAYS

    reply = await user.generate_reply(HELLO)

    assert reply == TextMessage(content="five", sender="user")
    assert person.prompts == [HUMAN_INPUT_PROMPT]


async def test_always_exit_is_a_terminate_message() -> None:
    person = Person("exit")
    reply = await UserProxyAgent(
        "user", input_fn=person.answer, output_fn=person.show
    ).generate_reply(HELLO)
    assert reply.content == TERMINATE
    assert is_terminate(reply)
    assert reply.sender == "user"


async def test_always_empty_input_or_end_of_input_is_an_empty_reply() -> None:
    person = Person("", None)
    user = UserProxyAgent("user", input_fn=person.answer, output_fn=person.show)
    assert (await user.generate_reply(HELLO)).content == ""
    assert (await user.generate_reply(HELLO)).content == ""
    assert len(person.prompts) == 2


async def test_async_input_and_output_functions() -> None:
    shown: list[str] = []

    async def show(text: str) -> None:
        shown.append(text)

    async def answer() -> str:
        return "from a service"

    user = UserProxyAgent("user", input_fn=answer, output_fn=show)
    assert (await user.generate_reply(HELLO)).content == "from a service"
    assert shown == [HUMAN_INPUT_PROMPT]


async def test_never_lets_the_inner_agent_or_default_reply_answer() -> None:
    person = Person()
    default = UserProxyAgent(
        "user",
        human_input_mode=HumanInputMode.NEVER,
        default_reply="no human here",
        input_fn=person.answer,
        output_fn=person.show,
    )
    assert (await default.generate_reply(HELLO)).content == "no human here"

    inner = ScriptedAgent("model", ["model answer"])
    proxied = UserProxyAgent(
        "user", human_input_mode=HumanInputMode.NEVER, inner=inner, input_fn=person.answer
    )
    reply = await proxied.generate_reply(HELLO)
    assert (reply.content, reply.sender) == ("model answer", "user")
    assert person.prompts == []


async def test_auto_asks_only_once_the_conversation_is_terminated() -> None:
    person = Person("thanks, all good")
    inner = ScriptedAgent("user", ["working on it"])
    user = UserProxyAgent(
        "user",
        human_input_mode=HumanInputMode.AUTO,
        inner=inner,
        input_fn=person.answer,
        output_fn=person.show,
    )

    first = await user.generate_reply(HELLO)
    assert first.content == "working on it"
    assert person.prompts == []

    second = await user.generate_reply([*HELLO, terminate_message("assistant")])
    assert second.content == "thanks, all good"
    assert person.prompts == [HUMAN_INPUT_PROMPT]


async def test_auto_with_custom_termination_test() -> None:
    person = Person("ok")
    user = UserProxyAgent(
        "user",
        human_input_mode=HumanInputMode.AUTO,
        default_reply="auto",
        input_fn=person.answer,
        output_fn=person.show,
        is_termination=lambda messages: "DONE" in messages[-1].content,
    )
    assert (await user.generate_reply(HELLO)).content == "auto"
    assert (await user.generate_reply([TextMessage(content="DONE now")])).content == "ok"


async def test_user_typing_exit_ends_a_two_agent_chat() -> None:
    person = Person("what is 2+2?", "exit")
    user = UserProxyAgent("user", input_fn=person.answer, output_fn=person.show)
    assistant = ScriptedAgent("assistant", ["How can I help?", "4"])

    result = await initiate_chat(user, assistant, "Hey assistant, please help me.")

    assert [m.content for m in result.messages] == [
        "Hey assistant, please help me.",
        "How can I help?",
        "what is 2+2?",
        "4",
        TERMINATE,
    ]
    assert result.stop_reason is StopReason.TERMINATED
