"""Every reply has a length: per-role caps on the real requests, and replies cut off at them."""

from __future__ import annotations

from sandcrew.agents import StopReason
from sandcrew.crew import ReplyTokens, solve_task
from sandcrew.testing import PERSONAS, ScriptedModelServer, ScriptedSandbox, Turn
from tests.crew.conftest import (
    FIBONACCI_ANSWER,
    FIBONACCI_CODE,
    FIBONACCI_TASK,
    admin_final_turn,
    review_turn,
    settings_for,
)

CUT_OFF = Turn(
    agent="coder",
    content="Here is the code.\n\n```python\ndef fibonacci(n):\n    # first, a long",
    finish_reason="length",
)


def caps_by_agent(server: ScriptedModelServer) -> list[tuple[str | None, object]]:
    return [(r.agent, r.body.get("max_tokens")) for r in server.requests if r.method == "POST"]


async def test_each_role_asks_for_a_reply_that_fits_its_job(
    fake_sandbox: ScriptedSandbox,
) -> None:
    with ScriptedModelServer(PERSONAS["compliant"].script("admin")) as server:
        result = await solve_task(
            FIBONACCI_TASK, settings_for(server, mode="admin"), sandbox=fake_sandbox
        )
        caps = caps_by_agent(server)

    assert result.solved, result.stop_detail
    default = ReplyTokens()
    expected = {"coder": default.coder, "reviewer": default.reviewer}
    for agent, cap in caps:
        if agent == "admin":
            assert cap in (default.admin, 128)  # its answer, or a speaker's name
        else:
            assert cap == expected[str(agent)]
    assert (default.coder, default.reviewer, default.admin) == (2048, 512, 512)
    assert ("admin", 128) in caps
    assert ("admin", 512) in caps


async def test_the_caps_are_settings(fake_sandbox: ScriptedSandbox) -> None:
    with ScriptedModelServer(PERSONAS["compliant"].script()) as server:
        settings = settings_for(server, reply_tokens={"coder": 900, "admin": 64})
        await solve_task(FIBONACCI_TASK, settings, sandbox=fake_sandbox)
        caps = caps_by_agent(server)

    assert caps == [("coder", 900), ("reviewer", 512), ("admin", 64)]


async def test_a_reply_cut_off_at_its_cap_is_asked_again_shorter(
    scripted_model_server: ScriptedModelServer, fake_sandbox: ScriptedSandbox
) -> None:
    scripted_model_server.add(
        CUT_OFF,
        Turn(agent="coder", content=f"Here is the code.\n\n{FIBONACCI_CODE}"),
        review_turn(),
        admin_final_turn(),
    )

    settings = settings_for(scripted_model_server)
    result = await solve_task(FIBONACCI_TASK, settings, sandbox=fake_sandbox)

    assert result.solved, result.stop_detail
    assert FIBONACCI_ANSWER in (result.answer or "")
    first, second = scripted_model_server.requests_for("coder")
    assert first.messages != second.messages  # the retry says what was wrong
    assert "cut off: it reached 2048 tokens" in second.messages[-1]["content"]
    coder_message = next(m for m in result.messages if m.sender == "coder")
    assert any("cut off at its limit of 2048 tokens" in note for note in coder_message.notes)
    assert len(fake_sandbox.runs) == 1  # the cut-off code never ran


async def test_a_reply_cut_off_twice_stops_with_the_reason(
    scripted_model_server: ScriptedModelServer, fake_sandbox: ScriptedSandbox
) -> None:
    scripted_model_server.add(CUT_OFF.model_copy(update={"times": 2}))

    settings = settings_for(scripted_model_server)
    result = await solve_task(FIBONACCI_TASK, settings, sandbox=fake_sandbox)

    assert not result.solved
    assert result.stop_reason is StopReason.ERROR
    assert "wrote past its limit of 2048 tokens twice (finish_reason='length')" in (
        result.stop_detail
    )
    assert "reply_tokens" in result.stop_detail
    assert fake_sandbox.runs == []
    # what the failed request tried stays on the result
    assert any("asked again for a shorter one" in note for note in result.notes)
