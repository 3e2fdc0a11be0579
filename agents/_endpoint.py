"""Where a model lives: one validated value, and the one place that builds its client.

Every model agent (and every check that talks to the endpoint) gets its
``openai.AsyncOpenAI`` from :meth:`ModelEndpoint.client`, so the retry and timeout
policy is decided here once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import (
    Field,
    SecretStr,
    field_validator,
)

from ..core import ConfigurationError
from ..core._settings_model import SettingsModel

if TYPE_CHECKING:
    import openai

DEFAULT_MODEL = "gpt-4o-mini"
NO_KEY_PLACEHOLDER = "sandcrew-no-key"
"""Sent as the API key to local servers that need none (the client insists on one)."""

MAX_REQUEST_TIMEOUT = 3600.0
"""Seconds one model request may take at most (a slow local model on a CPU stays below)."""
MAX_RETRIES = 10
"""Retries per request at most; the client backs off exponentially, so more only hides an outage."""


ChatFormSetting = Literal["auto", "open", "alternating", "alternating-no-system"]
"""The ``chat_form`` setting: ``auto`` finds the form an endpoint needs; the others force one."""


class ModelEndpoint(SettingsModel):
    """An OpenAI-compatible endpoint and the model asked there.

    ``base_url`` ``None`` means OpenAI itself; any OpenAI-compatible server (Ollama, vLLM,
    llama.cpp, LM Studio, Azure …) works through it. A local server needs no ``api_key``.
    """

    settings_title: ClassVar[str] = "model endpoint"

    model: str = Field(default=DEFAULT_MODEL, min_length=1)
    base_url: str | None = None
    api_key: SecretStr | None = None
    timeout: float = Field(default=300.0, gt=0, le=MAX_REQUEST_TIMEOUT, allow_inf_nan=False)
    """Seconds to wait for one model answer. Generous by default: a CPU-run local model
    answers one request at a time, and time spent queued counts."""
    retries: int = Field(default=2, ge=0, le=MAX_RETRIES)
    """Retries (with backoff) of a request on 429, 5xx and a server that cannot be reached.
    A request that timed out is never sent again (the server may still be generating it)."""
    chat_form: ChatFormSetting = "auto"
    """How conversations are laid out: ``auto`` sends the open form and switches to the
    alternating form the first time the server refuses the turn structure (or answers a
    non-alternating request empty twice); ``open``, ``alternating`` or
    ``alternating-no-system`` force one form."""

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if not value.startswith(("http://", "https://")) or len(value) < len("http://x"):
            raise ValueError(
                f"base_url must be an http:// or https:// URL such as "
                f"http://localhost:11434/v1 (got {value!r})"
            )
        return value

    @property
    def configured(self) -> bool:
        """A key or a server to ask: without either no request can succeed."""
        has_key = self.api_key is not None and bool(self.api_key.get_secret_value())
        return has_key or self.base_url is not None

    def api_key_value(self) -> str:
        """The key to send; a placeholder for key-less local servers."""
        if self.api_key is not None and self.api_key.get_secret_value():
            return self.api_key.get_secret_value()
        if self.base_url:
            return NO_KEY_PLACEHOLDER
        raise self.not_configured()

    def not_configured(self) -> ConfigurationError:
        return ConfigurationError(
            "no model configured: set OPENAI_API_KEY to use OpenAI, or give base_url "
            "(--base-url or OPENAI_BASE_URL) for a local OpenAI-compatible server, e.g. "
            "--base-url http://localhost:11434/v1 for Ollama, http://localhost:8000/v1 for "
            "vLLM, http://localhost:8080/v1 for llama.cpp"
        )

    def client(self, **overrides: Any) -> openai.AsyncOpenAI:
        """A new client for this endpoint (``overrides`` replace fields, e.g. ``retries=0``)."""
        # Here, not at the top: settings are read by commands that never talk to a model.
        import openai

        endpoint = self.model_validate({**self.model_dump(), **overrides}) if overrides else self
        # Unconfigured, the client still finds OPENAI_API_KEY / OPENAI_BASE_URL itself.
        api_key = endpoint.api_key_value() if endpoint.configured else None
        try:
            return openai.AsyncOpenAI(
                base_url=endpoint.base_url,
                api_key=api_key,
                max_retries=endpoint.retries,
                timeout=endpoint.timeout,
            )
        except openai.OpenAIError:
            raise endpoint.not_configured() from None
