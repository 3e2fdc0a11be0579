"""Middleware: wrapping returns a new agent; the last registered middleware runs first."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from sandcrew.agents import (
    Agent,
    DefaultReplyAgent,
    GenerateReplyOptions,
    Message,
    Middleware,
    MiddlewareAgent,
    TextMessage,
    use,
)
from sandcrew.errors import UserError
from sandcrew.testing import ScriptedAgent


def recording(label: str, log: list[str]) -> Middleware:
    async def middleware(
        messages: Sequence[Message], options: GenerateReplyOptions, agent: Agent
    ) -> Message:
        log.append(f"{label} in")
        reply = await agent.generate_reply(messages, options)
        log.append(f"{label} out")
        return reply.model_copy(update={"content": f"{reply.content}+{label}"})

    middleware.__name__ = label
    return middleware


async def test_last_registered_middleware_runs_first() -> None:
    log: list[str] = []
    inner = DefaultReplyAgent("bot", "reply")
    agent = inner.use(recording("first", log)).use(recording("second", log))

    reply = await agent.generate_reply([TextMessage(content="hi")])

    assert log == ["second in", "first in", "first out", "second out"]
    assert reply.content == "reply+first+second"
    assert reply.sender == "bot"
    assert repr(agent) == "MiddlewareAgent(second -> first -> DefaultReplyAgent(name='bot'))"


async def test_use_with_several_middlewares_keeps_the_same_order() -> None:
    log: list[str] = []
    agent = use(DefaultReplyAgent("bot", "r"), recording("a", log), recording("b", log))
    await agent.generate_reply([])
    assert log == ["b in", "a in", "a out", "b out"]


async def test_use_leaves_the_original_agent_untouched() -> None:
    log: list[str] = []
    base = DefaultReplyAgent("bot", "plain").use(recording("kept", log))
    extended = base.use(recording("extra", log))

    assert (await base.generate_reply([])).content == "plain+kept"
    assert log == ["kept in", "kept out"]
    assert (await extended.generate_reply([])).content == "plain+kept+extra"
    assert len(base.middlewares) == 1
    assert len(extended.middlewares) == 2


async def test_middleware_may_answer_without_calling_the_inner_agent() -> None:
    inner = ScriptedAgent("bot", [])  # would fail the test if called

    async def short_cut(
        messages: Sequence[Message], options: GenerateReplyOptions, agent: Agent
    ) -> Message:
        return TextMessage(content="handled", sender=agent.name)

    reply = await inner.use(short_cut).generate_reply([TextMessage(content="x")])
    assert reply.content == "handled"
    assert inner.received == []


async def test_class_middleware_gets_options_and_is_named() -> None:
    class Cooler:
        name = "cooler"

        async def __call__(
            self, messages: Sequence[Message], options: GenerateReplyOptions, agent: Agent
        ) -> Message:
            return await agent.generate_reply(
                messages, options.model_copy(update={"temperature": 0.0})
            )

    inner = ScriptedAgent("bot", ["ok"])
    agent = inner.register_middleware(Cooler())
    await agent.generate_reply([], GenerateReplyOptions(max_tokens=5))
    assert inner.options == [GenerateReplyOptions(max_tokens=5, temperature=0.0)]
    assert "cooler" in repr(agent)


async def test_middleware_receives_options_even_when_none_given() -> None:
    seen: list[GenerateReplyOptions] = []

    async def spy(
        messages: Sequence[Message], options: GenerateReplyOptions, agent: Agent
    ) -> Message:
        seen.append(options)
        return await agent.generate_reply(messages, options)

    await DefaultReplyAgent("bot", "r").use(spy).generate_reply([])
    assert seen == [GenerateReplyOptions()]


def test_wrapped_agent_keeps_name_and_description() -> None:
    agent = ScriptedAgent("coder", description="writes code").use(recording("m", []))
    assert isinstance(agent, MiddlewareAgent)
    assert agent.name == "coder"
    assert agent.description == "writes code"


def test_agent_needs_a_name_and_use_needs_a_middleware() -> None:
    with pytest.raises(UserError, match="non-empty name"):
        DefaultReplyAgent(" ", "x")
    with pytest.raises(UserError, match="at least one middleware"):
        use(DefaultReplyAgent("a", "x"))
