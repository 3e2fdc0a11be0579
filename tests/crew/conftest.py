"""Fixtures for the crew: the scripted model server and scripts of whole conversations."""

from __future__ import annotations

from typing import Any

import pytest

from sandcrew.agents import ModelEndpoint
from sandcrew.crew import CrewSettings
from sandcrew.sandbox import SandboxConfig
from sandcrew.testing import (
    ALL_CHECKS_PASS,
    FIBONACCI_ANSWER,
    FIBONACCI_TASK,
    ScriptedModelServer,
    ScriptedSandbox,
    ScriptedToolCall,
    Turn,
)
from tests.crew.fakes import fibonacci_sandbox
from tests.process import run_cli
from tests.programs import FIBONACCI_PROGRAM

# Re-exported: the crew tests take the task and its answer from here.
__all__ = ["FIBONACCI_ANSWER", "FIBONACCI_TASK", "run_cli"]

FIBONACCI_CODE = f"```python\n{FIBONACCI_PROGRAM}```"


def review_turn(times: int = 1, **checks: bool) -> Turn:
    """The reviewer model calling review_code_block with ``checks`` over all-good defaults."""
    return Turn(
        agent="reviewer",
        tool_calls=[
            ScriptedToolCall(name="review_code_block", arguments={**ALL_CHECKS_PASS, **checks})
        ],
        times=times,
    )


def coder_turn(code: str, **fields: Any) -> Turn:
    return Turn(agent="coder", content=f"Here is the code.\n\n{code}", **fields)


def admin_final_turn(answer: str = FIBONACCI_ANSWER) -> Turn:
    return Turn(
        agent="admin",
        system="You are the admin",
        content=f"The 39th Fibonacci number is {answer}.\n[COMPLETE]",
    )


def happy_path_turns() -> list[Turn]:
    return [coder_turn(FIBONACCI_CODE), review_turn(), admin_final_turn()]


@pytest.fixture
def fake_sandbox() -> ScriptedSandbox:
    """The sandbox test double: scripted outcomes for the test programs, no Docker."""
    return fibonacci_sandbox()


def settings_for(server: ScriptedModelServer, **overrides: Any) -> CrewSettings:
    overrides.setdefault("sandbox", SandboxConfig(timeout=10))
    endpoint = ModelEndpoint(base_url=server.base_url, api_key="test-key", model="scripted")
    return CrewSettings(endpoint=endpoint, **overrides)
