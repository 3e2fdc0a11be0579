"""The options that several commands share, and the one mapping from options to settings.

Defaults shown in ``--help`` are read from the settings models, so they cannot drift from
the values that apply. Options only convert text to values; the settings models validate.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated, Any

import typer

from sandcrew.agents import ModelEndpoint
from sandcrew.crew import CrewMode, CrewSettings
from sandcrew.sandbox import SandboxConfig
from sandcrew.sandbox.images import DEFAULT_IMAGES
from sandcrew.settings import DEFAULT_CONFIG_PATH, AppSettings, load_settings


def _default(model: type[Any], field: str) -> Any:
    return model.model_fields[field].get_default(call_default_factory=True)


def memory_text(size: int) -> str:
    """Bytes in Docker's units, as a user would type them (``268435456`` → ``256m``)."""
    for unit, factor in (("g", 1024**3), ("m", 1024**2), ("k", 1024)):
        if size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


def parse_memory(text: str) -> int:
    """Docker-style memory sizes (``256m``, ``1g``, bytes) → bytes."""
    from docker.errors import DockerException
    from docker.utils import parse_bytes

    try:
        value = int(parse_bytes(text))
    except (DockerException, ValueError, OverflowError):
        raise typer.BadParameter(f"must look like 256m or 1g (got {text!r})") from None
    return value


class Language(enum.StrEnum):
    """Languages a program may be written in (``run --language``)."""

    PYTHON = "python"
    BASH = "bash"
    JAVASCRIPT = "javascript"


RUN_TIMEOUT_DEFAULT = _default(SandboxConfig, "timeout")
MEMORY_DEFAULT = memory_text(_default(SandboxConfig, "memory_bytes"))
MODEL_DEFAULT = _default(ModelEndpoint, "model")

_RUN_TIMEOUT_HELP = "Wall-clock limit of each program run, seconds."
RunTimeout = Annotated[
    float | None,
    typer.Option("--run-timeout", help=_RUN_TIMEOUT_HELP, show_default=f"{RUN_TIMEOUT_DEFAULT:g}"),
]
RunTimeoutOrTimeout = Annotated[
    float | None,
    typer.Option(
        "--run-timeout",
        "--timeout",
        help=_RUN_TIMEOUT_HELP + " --timeout is the same.",
        show_default=f"{RUN_TIMEOUT_DEFAULT:g}",
    ),
]
"""For commands where ``--timeout`` always meant the run's limit (run, suite run)."""
Memory = Annotated[
    int | None,
    typer.Option(
        parser=parse_memory,
        metavar="SIZE",
        help="Memory limit of each program run, Docker units (256m, 1g).",
        show_default=MEMORY_DEFAULT,
    ),
]
Image = Annotated[str | None, typer.Option(help="Sandbox image for the runs.")]
Model = Annotated[
    str | None, typer.Option(help="Model for every role.", show_default=MODEL_DEFAULT)
]
BaseUrl = Annotated[
    str | None,
    typer.Option(help="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1."),
]
Config = Annotated[
    Path | None,
    typer.Option(help=f"TOML settings file (default {DEFAULT_CONFIG_PATH}).", metavar="FILE"),
]
Mode = Annotated[
    CrewMode | None,
    typer.Option(
        help="How the next speaker is chosen.", show_default=_default(CrewSettings, "mode").value
    ),
]
MaxRounds = Annotated[
    int | None,
    typer.Option(
        help="Agent replies before giving up.",
        show_default=str(_default(CrewSettings, "max_rounds")),
    ),
]
TokenBudget = Annotated[
    int | None, typer.Option("--token-budget", help="Tokens the whole chat may use (all models).")
]
TimeBudget = Annotated[
    float | None,
    typer.Option("--time-budget", help="Wall-clock budget of the whole chat, seconds."),
]
RequestTimeout = Annotated[
    float | None,
    typer.Option(
        "--request-timeout",
        help="Seconds to wait for one model answer (a timed-out request is not re-sent).",
        show_default=f"{_default(ModelEndpoint, 'timeout'):g}",
    ),
]
ModelRetries = Annotated[
    int | None,
    typer.Option(
        "--model-retries",
        help="Retries of a model request on 429, 5xx or an unreachable server.",
        show_default=str(_default(ModelEndpoint, "retries")),
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")]
InputFiles = Annotated[
    list[Path] | None,
    typer.Option(
        "--file",
        "-f",
        help="Input file (or folder) put into the work dir (every run's, or the session's "
        "before its first cell); repeatable.",
        metavar="PATH",
    ),
]

Network = Annotated[bool, typer.Option("--network", help="Allow network access (off by default).")]

AllowHost = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-host",
        metavar="HOST[:PORT]",
        help="Let programs reach this host through sandcrew's proxy, and nothing else "
        "(repeatable; *.example.org for its subdomains; ports 443 and 80 unless given).",
    ),
]
SecretHeader = Annotated[
    list[str] | None,
    typer.Option(
        "--secret-header",
        metavar="'HOST[:PORT]=Name: value'",
        help="A header the proxy adds to requests to HOST, its value from {env:VAR} or "
        "{file:PATH}, never seen by the program (repeatable; http://HOST:PORT= for plain HTTP).",
    ),
]


def sandbox_flags(
    *,
    run_timeout: float | None = None,
    memory: int | None = None,
    image: str | None = None,
    language: str | None = None,
    network: bool | None = None,
    allow_hosts: list[str] | None = None,
    secret_headers: list[str] | None = None,
) -> dict[str, Any]:
    """The ``[sandbox]`` settings the options give (``None``: not given).

    ``image`` replaces the image of ``language``, or of every language when none is given.
    ``--allow-host`` and ``--secret-header`` together make the run's network policy.
    """
    images = None
    if image is not None:
        languages = [language] if language else list(DEFAULT_IMAGES)
        images = {**DEFAULT_IMAGES, **dict.fromkeys(languages, image)}
    return {
        "timeout": run_timeout,
        "memory_bytes": memory,
        "images": images,
        "network": network or None,
        "egress": (
            {"allow": allow_hosts or [], "secret_headers": secret_headers or []}
            if allow_hosts or secret_headers
            else None
        ),
    }


def flags_from_options(
    *,
    model: str | None = None,
    base_url: str | None = None,
    request_timeout: float | None = None,
    model_retries: int | None = None,
    role_models: dict[str, str | None] | None = None,
    mode: CrewMode | None = None,
    max_rounds: int | None = None,
    token_budget: int | None = None,
    time_budget: float | None = None,
    sandbox: dict[str, Any] | None = None,
    sessions: dict[str, Any] | None = None,
    mcp: dict[str, Any] | None = None,
    e2b: dict[str, Any] | None = None,
    suites: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The one place where command-line options become settings fields (every command)."""
    return {
        "sessions": sessions or {},
        "mcp": mcp or {},
        "e2b": e2b or {},
        "suites": suites or {},
        "endpoint": {
            "model": model,
            "base_url": base_url,
            "timeout": request_timeout,
            "retries": model_retries,
        },
        "role_models": role_models or {},
        "mode": mode,
        "max_rounds": max_rounds,
        "token_budget": token_budget,
        "time_budget": time_budget,
        "sandbox": sandbox or {},
    }


def settings_from_options(*, config: Path | None = None, **given: Any) -> AppSettings:
    """Settings from the options of any command (see :func:`flags_from_options`)."""
    return load_settings(flags_from_options(**given), config_path=config)
