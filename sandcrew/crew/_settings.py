"""Typed settings of one crew: model endpoint, per-role models, limits, sandbox.

Every limit is validated here, with upper bounds that keep the arithmetic of deadlines and
budgets meaningful; the command line and the config file only feed these models.
"""

from __future__ import annotations

import enum
from typing import Literal

from pydantic import (
    Field,
)

from sandcrew.agents import DEFAULT_MODEL, ModelEndpoint
from sandcrew.core._settings_model import SettingsModel
from sandcrew.sandbox import SandboxConfig

ModelRole = Literal["admin", "coder", "reviewer"]

MAX_ROUNDS = 1000
"""Agent replies per chat at most; far above any useful chat, below an accidental runaway."""
MAX_TIME_BUDGET = 7 * 24 * 3600.0
"""A week: the longest wall-clock budget a chat accepts."""
MAX_TOKEN_BUDGET = 10**9
MAX_REVIEW_ATTEMPTS = 10


class CrewMode(enum.StrEnum):
    """How the next speaker is chosen."""

    WORKFLOW = "workflow"
    """The seed's graph decides; no model call is spent on speaker selection."""
    ADMIN = "admin"
    """The admin model picks every speaker by role play."""
    WORKFLOW_ADMIN = "workflow+admin"
    """The graph narrows the candidates; the admin decides only between several."""


class CrewSettings(SettingsModel):
    """Everything a crew needs to run one task."""

    endpoint: ModelEndpoint = Field(default_factory=ModelEndpoint)
    """Where the models live (one client for every agent) and the default model."""
    role_models: dict[ModelRole, str] = Field(default_factory=dict)
    """Per-role model overrides, e.g. a cheaper reviewer."""
    mode: CrewMode = CrewMode.WORKFLOW
    max_rounds: int = Field(default=20, ge=1, le=MAX_ROUNDS)
    """Agent replies allowed before the chat stops (speaker selection not counted)."""
    token_budget: int | None = Field(default=None, ge=1, le=MAX_TOKEN_BUDGET)
    """Total tokens (all models, speaker selection included) before the chat stops."""
    time_budget: float | None = Field(default=None, gt=0, le=MAX_TIME_BUDGET, allow_inf_nan=False)
    """Wall-clock seconds before the chat stops."""
    review_attempts: int = Field(default=3, ge=1, le=MAX_REVIEW_ATTEMPTS)
    """How often the reviewer model is asked to make its function call."""
    context_tokens: int = Field(default=8192, ge=2048, le=10**7)
    """The models' context size: the oldest turns are left out of a request that would not
    fit it (the task and the latest code, review and run always stay)."""
    max_output_chars: int = Field(default=4000, ge=100, le=10**7)
    """Longer texts (run outputs, long replies) reach a model trimmed to head and tail."""
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)

    @property
    def model(self) -> str:
        """The default model (of every role without its own)."""
        return self.endpoint.model

    def model_for(self, role: ModelRole) -> str:
        return self.role_models.get(role, self.endpoint.model)


__all__ = ["DEFAULT_MODEL", "CrewMode", "CrewSettings", "ModelRole"]
