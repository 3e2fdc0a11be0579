"""UserProxyAgent and human input modes (seed 003), with injected input and output."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from sandcrew.agents import (
    HUMAN_INPUT_PROMPT,
    TERMINATE,
    AssistantAgent,
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

REPOSITORY = Path(__file__).resolve().parents[2]


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


async def test_never_answers_with_the_inner_agent_or_the_default_reply_and_asks_no_one() -> None:
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


async def test_default_reply_is_autogens_text() -> None:
    user = UserProxyAgent("user", human_input_mode=HumanInputMode.NEVER)
    reply = await user.generate_reply(HELLO)
    assert reply.content == (
        "Default reply is not set. Please pass a default reply to assistant agent"
    )


async def test_assistant_agent_is_the_same_agent_that_never_asks_by_default() -> None:
    person = Person("typed")
    assistant = AssistantAgent(
        "assistant", default_reply="fixed", input_fn=person.answer, output_fn=person.show
    )
    assert isinstance(assistant, UserProxyAgent)
    assert assistant.human_input_mode is HumanInputMode.NEVER
    assert (await assistant.generate_reply(HELLO)).content == "fixed"
    assert person.prompts == []

    asking = AssistantAgent(
        "assistant",
        human_input_mode=HumanInputMode.ALWAYS,
        input_fn=person.answer,
        output_fn=person.show,
    )
    assert (await asking.generate_reply(HELLO)).content == "typed"
    assert person.prompts == [HUMAN_INPUT_PROMPT]


def run_chat_reading_the_console(code: str, stdin_text: str | None, timeout: float) -> str:
    """Run ``code`` in a fresh interpreter whose stdin is a pipe; return its output.

    ``stdin_text=None`` keeps the pipe open without ever writing to it.
    """
    with subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=REPOSITORY,
        text=True,
    ) as process:
        assert process.stdin is not None
        assert process.stdout is not None
        if stdin_text is not None:
            process.stdin.write(stdin_text)
            process.stdin.flush()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            output = process.stdout.read()
            raise AssertionError(f"the chat did not exit within {timeout} s:\n{output}") from None
        output = process.stdout.read()
    assert process.returncode == 0, output
    return output


def test_time_budget_ends_a_chat_waiting_for_console_input_and_the_process_exits() -> None:
    output = run_chat_reading_the_console(
        """
        import asyncio
        from sandcrew.agents import GroupChat, TextMessage, UserProxyAgent
        from sandcrew.testing import ScriptedAgent

        async def main() -> None:
            chat = GroupChat(
                [ScriptedAgent("assistant", ["How can I help?"]), UserProxyAgent("user")],
                time_budget=1,
            )
            result = await chat.call([TextMessage(content="hi", sender="user")])
            print("stopped:", result.stop_reason.value, result.detail)

        asyncio.run(main())
        print("exited")
        """,
        stdin_text=None,
        timeout=15,
    )
    assert "stopped: time_budget" in output
    assert "(while speaker 'user' worked)" in output
    assert output.rstrip().endswith("exited")
    assert "Fatal Python error" not in output


def test_console_input_from_a_pipe_answers_line_by_line() -> None:
    output = run_chat_reading_the_console(
        """
        import asyncio
        from sandcrew.agents import TextMessage, UserProxyAgent

        async def main() -> None:
            user = UserProxyAgent("user", output_fn=lambda text: None)
            hello = [TextMessage(content="hi", sender="assistant")]
            for _ in range(3):
                reply = await user.generate_reply(hello)
                print("reply:", repr(reply.content), reply.terminate)

        asyncio.run(main())
        """,
        stdin_text="first answer\r\nsecond answer\nexit\n",
        timeout=15,
    )
    assert output.splitlines() == [
        "reply: 'first answer' False",
        "reply: 'second answer' False",
        "reply: '[GROUPCHAT_TERMINATE]' True",
    ]
