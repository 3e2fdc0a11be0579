"""Typed settings of one crew: model endpoint, per-role models, limits, sandbox."""

from __future__ import annotations

import enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from sandcrew.errors import ConfigurationError
from sandcrew.sandbox import SandboxConfig

DEFAULT_MODEL = "gpt-4o-mini"
NO_KEY_PLACEHOLDER = "sandcrew-no-key"
"""Sent as the API key to local servers that need none (the client insists on one)."""

ModelRole = Literal["admin", "coder", "reviewer"]


class CrewMode(enum.StrEnum):
    """How the next speaker is chosen."""

    WORKFLOW = "workflow"
    """The seed's graph decides; no model call is spent on speaker selection."""
    ADMIN = "admin"
    """The admin model picks every speaker by role play."""
    WORKFLOW_ADMIN = "workflow+admin"
    """The graph narrows the candidates; the admin decides only between several."""


class CrewSettings(BaseModel):
    """Everything a crew needs to run one task."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = DEFAULT_MODEL
    base_url: str | None = None
    """An OpenAI-compatible endpoint (Ollama, vLLM, llama.cpp, LM Studio, Azure …)."""
    api_key: SecretStr | None = None
    role_models: dict[ModelRole, str] = Field(default_factory=dict)
    """Per-role model overrides, e.g. a cheaper reviewer."""
    mode: CrewMode = CrewMode.WORKFLOW
    max_rounds: int = Field(default=20, ge=1)
    """Agent replies allowed before the chat stops (speaker selection not counted)."""
    token_budget: int | None = Field(default=None, ge=1)
    """Total tokens (all models, speaker selection included) before the chat stops."""
    time_budget: float | None = Field(default=None, gt=0)
    """Wall-clock seconds before the chat stops."""
    review_attempts: int = Field(default=3, ge=1)
    """How often the reviewer model is asked to make its function call."""
    model_retries: int = Field(default=2, ge=0)
    """Client retries (with backoff) on 429, 5xx and timeouts, per model request."""
    request_timeout: float = Field(default=60.0, gt=0)
    context_tokens: int = Field(default=8192, ge=2048)
    """The models' context size: the oldest turns are left out of a request that would not
    fit it (the task and the latest code, review and run always stay)."""
    max_output_chars: int = Field(default=4000, ge=100)
    """Longer texts (run outputs, long replies) reach a model trimmed to head and tail."""
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)

    def model_for(self, role: ModelRole) -> str:
        return self.role_models.get(role, self.model)

    def api_key_value(self) -> str:
        """The key to send; fails with the way to configure a model when there is none."""
        if self.api_key is not None and self.api_key.get_secret_value():
            return self.api_key.get_secret_value()
        if self.base_url:
            return NO_KEY_PLACEHOLDER
        raise ConfigurationError(
            "no model configured: set OPENAI_API_KEY to use OpenAI, or pass --base-url "
            "(or set OPENAI_BASE_URL) for a local OpenAI-compatible server, e.g. "
            "--base-url http://localhost:11434/v1 for Ollama, http://localhost:8000/v1 for "
            "vLLM, http://localhost:8080/v1 for llama.cpp"
        )
