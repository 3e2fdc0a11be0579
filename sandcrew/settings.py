"""Crew settings from flags, the environment and an optional TOML file, read once at the edge.

Precedence: command-line flags, then environment variables, then the config file, then
the defaults of :class:`~sandcrew.crew.CrewSettings`.

Environment: ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``SANDCREW_MODEL``, ``SANDCREW_MODE``,
``SANDCREW_MAX_ROUNDS``, ``SANDCREW_TOKEN_BUDGET``, ``SANDCREW_TIME_BUDGET``,
``SANDCREW_REQUEST_TIMEOUT``, ``SANDCREW_MODEL_RETRIES`` and
``SANDCREW_CONFIG`` (the file's path). Without ``SANDCREW_CONFIG`` or ``--config``,
``~/.config/sandcrew/config.toml`` is read when it exists.

The file holds the same keys as ``CrewSettings`` (``model``, ``base_url``, ``mode``,
``max_rounds``, ``[role_models]``, ``[sandbox]`` …).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sandcrew.crew import CrewSettings
from sandcrew.errors import ConfigurationError

_ENVIRONMENT_KEYS = {
    "OPENAI_API_KEY": "api_key",
    "OPENAI_BASE_URL": "base_url",
    "SANDCREW_MODEL": "model",
    "SANDCREW_MODE": "mode",
    "SANDCREW_MAX_ROUNDS": "max_rounds",
    "SANDCREW_TOKEN_BUDGET": "token_budget",
    "SANDCREW_TIME_BUDGET": "time_budget",
    "SANDCREW_REQUEST_TIMEOUT": "request_timeout",
    "SANDCREW_MODEL_RETRIES": "model_retries",
}

DEFAULT_CONFIG_PATH = Path("~/.config/sandcrew/config.toml")


def load_crew_settings(
    flags: Mapping[str, Any] | None = None,
    *,
    config_path: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> CrewSettings:
    """Merge file, environment and flags (``None`` flags are ignored) into settings."""
    env = os.environ if environ is None else environ
    merged: dict[str, Any] = _read_config_file(config_path, env)
    source = {key: "config file" for key in merged}
    for variable, key in _ENVIRONMENT_KEYS.items():
        if env.get(variable):
            merged[key] = env[variable]
            source[key] = variable
    for key, value in (flags or {}).items():
        if value is None:
            continue
        if key == "sandbox" and isinstance(value, Mapping):
            merged["sandbox"] = {**merged.get("sandbox", {}), **value}
        elif key == "role_models" and isinstance(value, Mapping):
            merged["role_models"] = {**merged.get("role_models", {}), **value}
        else:
            merged[key] = value
        source[key] = "command line"
    try:
        return CrewSettings.model_validate(merged)
    except ValidationError as error:
        problems = []
        for item in error.errors():
            location = ".".join(str(part) for part in item["loc"])
            origin = source.get(str(item["loc"][0]), "default") if item["loc"] else "settings"
            problems.append(f"{location} ({origin}): {item['msg']} (got {item.get('input')!r})")
        raise ConfigurationError("invalid settings:\n- " + "\n- ".join(problems)) from None


def _read_config_file(config_path: Path | None, env: Mapping[str, str]) -> dict[str, Any]:
    explicit = config_path or (Path(env["SANDCREW_CONFIG"]) if env.get("SANDCREW_CONFIG") else None)
    path = explicit or DEFAULT_CONFIG_PATH.expanduser()
    if explicit is None and not path.is_file():
        return {}
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except FileNotFoundError:
        raise ConfigurationError(f"config file not found: {path}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigurationError(f"config file {path} is not valid TOML: {error}") from None
