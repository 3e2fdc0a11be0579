"""Docker connection and sandbox settings shared by the commands."""

from __future__ import annotations

from typing import Any

from sandcrew.errors import UserError
from sandcrew.sandbox import SandboxConfig, connect_docker


def parse_memory(text: str) -> int:
    """Docker-style memory sizes (``256m``, ``1g``, bytes) → bytes, with a clear error."""
    from docker.errors import DockerException
    from docker.utils import parse_bytes

    try:
        value = int(parse_bytes(text))
    except (DockerException, ValueError):
        raise UserError(f"memory must look like 256m or 1g (got {text!r})") from None
    return value


def sandbox_config_from_options(
    *,
    timeout: float | None = None,
    memory: str | None = None,
    network: bool = False,
    image: str | None = None,
    language: str | None = None,
) -> SandboxConfig:
    """Build a :class:`SandboxConfig` from command-line options, keeping the defaults."""
    overrides: dict[str, Any] = {"network": network}
    if timeout is not None:
        overrides["timeout"] = timeout
    if memory is not None:
        overrides["memory_bytes"] = parse_memory(memory)
    if image is not None:
        defaults = SandboxConfig()
        languages = [language] if language else list(defaults.images)
        overrides["images"] = {**defaults.images, **dict.fromkeys(languages, image)}
    # SandboxConfig reports invalid values itself, as a ConfigurationError.
    return SandboxConfig(**overrides)


__all__ = ["connect_docker", "parse_memory", "sandbox_config_from_options"]
