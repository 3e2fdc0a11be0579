"""Docker connection and sandbox settings shared by the commands."""

from __future__ import annotations

from typing import Any

from sandcrew.errors import UserError
from sandcrew.sandbox import DEFAULT_IMAGES, SandboxConfig, connect_docker


def parse_memory(text: str) -> int:
    """Docker-style memory sizes (``256m``, ``1g``, bytes) → bytes, with a clear error."""
    from docker.errors import DockerException
    from docker.utils import parse_bytes

    try:
        value = int(parse_bytes(text))
    except (DockerException, ValueError):
        raise UserError(f"memory must look like 256m or 1g (got {text!r})") from None
    return value


def sandbox_overrides(
    *,
    timeout: float | None = None,
    memory: str | None = None,
    image: str | None = None,
    language: str | None = None,
) -> dict[str, Any]:
    """The ``SandboxConfig`` fields that command-line options set (unset options: none).

    ``image`` replaces the image of ``language``, or of every language when none is given.
    """
    overrides: dict[str, Any] = {}
    if timeout is not None:
        overrides["timeout"] = timeout
    if memory is not None:
        overrides["memory_bytes"] = parse_memory(memory)
    if image is not None:
        languages = [language] if language else list(DEFAULT_IMAGES)
        overrides["images"] = {**DEFAULT_IMAGES, **dict.fromkeys(languages, image)}
    return overrides


def sandbox_config_from_options(
    *,
    timeout: float | None = None,
    memory: str | None = None,
    network: bool = False,
    image: str | None = None,
    language: str | None = None,
) -> SandboxConfig:
    """Build a :class:`SandboxConfig` from command-line options, keeping the defaults."""
    overrides = sandbox_overrides(timeout=timeout, memory=memory, image=image, language=language)
    # SandboxConfig reports invalid values itself, as a ConfigurationError.
    return SandboxConfig(network=network, **overrides)


__all__ = ["connect_docker", "parse_memory", "sandbox_config_from_options", "sandbox_overrides"]
