"""The one configuration edge: flags, environment and a TOML file become settings here.

Precedence (highest first): command-line flags, ``SANDCREW_*`` environment variables,
``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` / ``SANDCREW_MODEL``, the config file, then the
defaults of :class:`~sandcrew.crew.CrewSettings` (which validates every value, once).

Environment: ``SANDCREW_MODE``, ``SANDCREW_MAX_ROUNDS``, ``SANDCREW_TOKEN_BUDGET``,
``SANDCREW_TIME_BUDGET``, nested fields with ``__`` (``SANDCREW_ENDPOINT__TIMEOUT``,
``SANDCREW_SANDBOX__TIMEOUT``), and ``SANDCREW_CONFIG`` (the file's path). Without
``SANDCREW_CONFIG`` or ``--config``, ``~/.config/sandcrew/config.toml`` is read when it exists.

The file holds the keys of :class:`AppSettings` (the crew's at the top level, then a
table for the sandbox, sessions, the MCP server, the E2B server and suites)::

    mode = "workflow"
    max_rounds = 20
    [endpoint]
    model = "qwen2.5-coder"
    base_url = "http://localhost:11434/v1"
    timeout = 120
    [role_models]
    reviewer = "gpt-4o-mini"
    [sandbox]
    timeout = 10
    [sessions]
    cell_timeout = 60
    [mcp]
    max_sessions = 8
    [e2b]
    max_sandboxes = 4
    [suites]
    concurrency = 4
"""

from __future__ import annotations

import contextvars
import os
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, SecretStr
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from sandcrew.core._settings_model import SettingsModel
from sandcrew.crew import CrewSettings
from sandcrew.errors import ConfigurationError, InvalidSettings
from sandcrew.sandbox import SessionLimits

DEFAULT_CONFIG_PATH = Path("~/.config/sandcrew/config.toml")

COMMAND_LINE = "command line"
ENVIRONMENT = "environment"
CONFIG_FILE = "config file"
DEFAULT = "default"

_OPENAI_ENVIRONMENT = {
    "OPENAI_API_KEY": "api_key",
    "OPENAI_BASE_URL": "base_url",
    "SANDCREW_MODEL": "model",
}
"""The variables other OpenAI tools already read, for the endpoint's fields."""

_config_file: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "sandcrew_config_file", default=None
)


class _OpenAIEnvironment(PydanticBaseSettingsSource):
    """``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` and ``SANDCREW_MODEL`` → ``endpoint``."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        endpoint = {
            key: os.environ[variable]
            for variable, key in _OPENAI_ENVIRONMENT.items()
            if os.environ.get(variable)
        }
        return {"endpoint": endpoint} if endpoint else {}


class SessionSettings(SessionLimits):
    """The ``[sessions]`` table: :class:`~sandcrew.sandbox.SessionLimits` of every session
    the product opens (``repl``, ``solve --session``, the MCP and E2B servers override some
    with their own flags). ``max_sessions`` is the process's session cap."""


class McpSettings(SettingsModel):
    """The ``[mcp]`` table: what the MCP server allows its clients; its flags override these."""

    settings_title: ClassVar[str] = "MCP server settings"

    max_sessions: int = Field(default=4, ge=0, le=1000)
    """Sessions one client may hold open at once (0: no session tools)."""
    max_sessions_total: int = Field(default=32, ge=1, le=10_000)
    """Sessions all clients together may hold: the server process's session cap."""
    session_idle_timeout: float = Field(default=600.0, gt=0, le=86_400)
    """Seconds a session may go without a call before it is closed."""
    session_lifetime: float = Field(default=3600.0, gt=0, le=7 * 86_400)
    """Seconds after which a session is closed, however busy."""
    client_idle_timeout: float = Field(default=60.0, gt=0, le=86_400)
    """Over HTTP: seconds a client's MCP session may go with no request in flight and no open
    event stream before it ends (a client killed without its DELETE), closing its sessions."""
    max_pending_per_client: int = Field(default=8, ge=1, le=10_000)
    """Tool calls one client may have running or waiting at once."""
    max_pending: int = Field(default=32, ge=1, le=100_000)
    """Tool calls all clients together may have running or waiting at once."""
    max_file_bytes: int = Field(default=8 * 1024 * 1024, ge=1, le=1024**3)
    """Largest file a client may put into or get from a session (it travels as JSON)."""


class E2bSettings(SettingsModel):
    """The ``[e2b]`` table: what ``sandcrew e2b`` (the E2B-compatible server) allows its
    clients; its flags override these."""

    settings_title: ClassVar[str] = "E2B server settings"

    api_key: SecretStr | None = None
    """The key clients send as ``E2B_API_KEY`` (generated and printed when unset)."""
    max_sandboxes: int = Field(default=8, ge=1, le=1000)
    """Sandboxes the server holds at once; past it a create is refused (the SDK's
    rate-limit error)."""
    default_timeout: float = Field(default=300.0, gt=0, le=86_400)
    """Seconds a sandbox lives when its create names no timeout (E2B's default)."""
    max_timeout: float = Field(default=3600.0, gt=0, le=86_400)
    """Most seconds a create, ``set_timeout`` or ``connect`` may give a sandbox."""
    max_lifetime: float = Field(default=86_400.0, gt=0, le=7 * 86_400)
    """Seconds a sandbox lives at most, however often its timeout is moved."""
    max_cell_timeout: float = Field(default=600.0, gt=0, le=86_400)
    """Seconds a cell may run on the server's side (the SDK's own timeout usually ends
    it first: the server then interrupts it and keeps the state)."""
    max_body_bytes: int = Field(default=48 * 1024 * 1024, ge=1024, le=1024**3)
    """Largest request body (a file written through the files API included)."""


class SuiteSettings(SettingsModel):
    """The ``[suites]`` table: defaults of ``suite run`` and ``suite evaluate``."""

    settings_title: ClassVar[str] = "suite settings"

    concurrency: int | None = Field(default=None, ge=1, le=10_000)
    """Tasks (or samples) at once; ``None``: one per core (on Ray, one chunk per CPU)."""
    evaluate_timeout: float = Field(default=3.0, gt=0, le=86_400)
    """``suite evaluate``: seconds a sample's check may run, for problems that set none."""
    time_floor: float = Field(default=1.0, gt=0, le=86_400)
    """``suite evaluate --time-factor``: the least limit, seconds."""
    confirm_timeouts: bool = True
    """``suite evaluate``: check a sample that timed out once more, alone, before it counts."""


class AppSettings(CrewSettings):
    """The application's settings root: the crew's keys at the top level (as they always
    were), and the tables ``[sandbox]``, ``[sessions]``, ``[mcp]``, ``[e2b]`` and ``[suites]``."""

    sessions: SessionSettings = Field(default_factory=SessionSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    e2b: E2bSettings = Field(default_factory=E2bSettings)
    suites: SuiteSettings = Field(default_factory=SuiteSettings)


class _LoadedSettings(BaseSettings, AppSettings):
    """AppSettings filled from every source; an instance *is* an ``AppSettings``."""

    model_config = SettingsConfigDict(
        frozen=True,
        extra="forbid",
        env_prefix="SANDCREW_",
        env_nested_delimiter="__",
        env_ignore_empty=True,
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            _OpenAIEnvironment(settings_cls),
            *_file_source(settings_cls, _config_file.get()),
        )


def _file_source(
    settings_cls: type[BaseSettings], path: Path | None
) -> tuple[PydanticBaseSettingsSource, ...]:
    return () if path is None else (TomlConfigSettingsSource(settings_cls, toml_file=path),)


def config_file_path(explicit: Path | None = None) -> Path | None:
    """The TOML file that is read: ``--config``, ``SANDCREW_CONFIG``, else the default if any.

    An explicitly named file must exist and be valid TOML.
    """
    named = explicit or (
        Path(os.environ["SANDCREW_CONFIG"]) if os.environ.get("SANDCREW_CONFIG") else None
    )
    path = named or DEFAULT_CONFIG_PATH.expanduser()
    if named is None and not path.is_file():
        return None
    try:
        with path.open("rb") as file:
            tomllib.load(file)
    except FileNotFoundError:
        raise ConfigurationError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigurationError(f"config file {path} is a folder, not a file") from None
    except OSError as error:
        raise ConfigurationError(f"cannot read config file {path}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigurationError(f"config file {path} is not valid TOML: {error}") from None
    return path


def without_unset(flags: Mapping[str, Any]) -> dict[str, Any]:
    """``flags`` without ``None`` values and empty sections (flags the user did not give)."""
    kept: dict[str, Any] = {}
    for key, value in flags.items():
        if isinstance(value, Mapping):
            value = without_unset(value)
            if not value:
                continue
        if value is not None:
            kept[key] = value
    return kept


def load_settings(
    flags: Mapping[str, Any] | None = None, *, config_path: Path | None = None
) -> AppSettings:
    """Settings from flags (``None`` = not given), environment, config file and defaults."""
    given = without_unset(flags or {})
    path = config_file_path(config_path)
    token = _config_file.set(path)
    try:
        return _LoadedSettings(**given)
    except InvalidSettings as error:
        origins = _origins(given, path)
        problems = [f"{name} ({_source_of(origins, name)}): {why}" for name, why in error.problems]
        raise ConfigurationError("invalid settings: " + "; ".join(problems)) from None
    finally:
        _config_file.reset(token)


@dataclass(frozen=True)
class SettingValue:
    """One effective setting and where its value came from (for ``doctor``)."""

    name: str
    value: Any
    source: str


def describe_settings(
    settings: CrewSettings,
    flags: Mapping[str, Any] | None = None,
    *,
    config_path: Path | None = None,
) -> list[SettingValue]:
    """Every setting of ``settings`` (dotted names, secrets masked) with its source."""
    origins = _origins(without_unset(flags or {}), config_file_path(config_path))
    return [
        SettingValue(name, value, _source_of(origins, name))
        for name, value in _flatten(settings.model_dump(mode="json"))
    ]


def _origins(given: dict[str, Any], path: Path | None) -> list[tuple[str, dict[str, Any]]]:
    """What each source sets, highest precedence first."""
    origins: list[tuple[str, dict[str, Any]]] = [
        (COMMAND_LINE, InitSettingsSource(_LoadedSettings, given)()),
        (
            ENVIRONMENT,
            EnvSettingsSource(
                _LoadedSettings,
                env_prefix="SANDCREW_",
                env_nested_delimiter="__",
                env_ignore_empty=True,
            )(),
        ),
        (ENVIRONMENT, _OpenAIEnvironment(_LoadedSettings)()),
    ]
    for source in _file_source(_LoadedSettings, path):
        origins.append((f"{CONFIG_FILE} {path}", source()))
    return origins


def _source_of(origins: list[tuple[str, dict[str, Any]]], name: str) -> str:
    path = name.split(".")
    return next((label for label, values in origins if _has(values, path)), DEFAULT)


def _flatten(values: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and key != "images":
            yield from _flatten(value, f"{name}.")
        else:
            yield name, value


def _has(values: Any, path: list[str]) -> bool:
    for part in path:
        if not isinstance(values, Mapping) or part not in values:
            return False
        values = values[part]
    return True
