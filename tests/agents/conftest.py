"""Fixtures for the agents tests: the scripted model server and agents pointed at it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sandcrew.agents import ModelEndpoint, OpenAIChatAgent
from sandcrew.functions import function
from sandcrew.testing import ScriptedModelServer

AgentFactory = Callable[..., OpenAIChatAgent]
ENDPOINT_FIELDS = ("retries", "timeout", "chat_form")


@function
def review_code_block(has_multiple_code_blocks: bool, is_print_result_to_console: bool) -> str:
    """Record the review of a code block.

    Args:
        has_multiple_code_blocks: the message has more than one code block
        is_print_result_to_console: the code prints its result
    """
    good = not has_multiple_code_blocks and is_print_result_to_console
    return "The code looks good" if good else "There're some comments"


@pytest.fixture
def model_agent(scripted_model_server: ScriptedModelServer) -> AgentFactory:
    """Build an ``OpenAIChatAgent`` that talks to the scripted server over real HTTP."""

    def make(name: str, **settings: Any) -> OpenAIChatAgent:
        endpoint = ModelEndpoint(
            base_url=scripted_model_server.base_url,
            api_key="test-key",
            model=settings.pop("model", "scripted-model"),
            **{key: settings.pop(key) for key in ENDPOINT_FIELDS if key in settings},
        )
        return OpenAIChatAgent(name, endpoint=endpoint, **settings)

    return make
