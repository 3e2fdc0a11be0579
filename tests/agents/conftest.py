"""Fixtures for the agents tests: the scripted model server and agents pointed at it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sandcrew.agents import ModelEndpoint, OpenAIChatAgent
from sandcrew.testing import ScriptedModelServer

AgentFactory = Callable[..., OpenAIChatAgent]


@pytest.fixture
def model_agent(scripted_model_server: ScriptedModelServer) -> AgentFactory:
    """Build an ``OpenAIChatAgent`` that talks to the scripted server over real HTTP."""

    def make(name: str, **settings: Any) -> OpenAIChatAgent:
        endpoint = ModelEndpoint(
            base_url=scripted_model_server.base_url,
            api_key="test-key",
            model=settings.pop("model", "scripted-model"),
            **{key: settings.pop(key) for key in ("retries", "timeout") if key in settings},
        )
        return OpenAIChatAgent(name, endpoint=endpoint, **settings)

    return make
