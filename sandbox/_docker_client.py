"""Connecting to the Docker engine the way the docker CLI does.

``DOCKER_HOST`` wins; otherwise the current Docker context (``DOCKER_CONTEXT`` or
``currentContext`` in the docker CLI's config.json) names the endpoint; otherwise
the local socket. Failures become one clear :class:`DockerUnavailableError`.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import docker.tls
import docker.utils

from ._errors import DockerUnavailableError

DEFAULT_ENDPOINT = "unix:///var/run/docker.sock"
# Room for many concurrent runs: each attached run holds one connection.
_CONNECTION_POOL_SIZE = 32


@dataclass(frozen=True)
class DockerEndpoint:
    """Where the engine is expected and why (for error messages and `sandcrew doctor`)."""

    host: str
    source: str
    """``"DOCKER_HOST"``, ``"context <name>"`` or ``"default"``."""
    tls_dir: Path | None = None


def docker_config_dir(environ: Mapping[str, str]) -> Path:
    configured = environ.get("DOCKER_CONFIG")
    if configured:
        return Path(configured)
    return Path(environ.get("HOME") or Path.home()) / ".docker"


def current_context_name(environ: Mapping[str, str]) -> str:
    """The docker CLI's current context: DOCKER_CONTEXT, then config.json, then default."""
    name = environ.get("DOCKER_CONTEXT")
    if name:
        return name
    config_file = docker_config_dir(environ) / "config.json"
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "default"
    current = config.get("currentContext") if isinstance(config, dict) else None
    return current if isinstance(current, str) and current else "default"


def docker_endpoint(environ: Mapping[str, str] | None = None) -> DockerEndpoint:
    """Find the engine endpoint from DOCKER_HOST or the current Docker context."""
    env = os.environ if environ is None else environ
    host = env.get("DOCKER_HOST")
    if host:
        return DockerEndpoint(host=host, source="DOCKER_HOST")
    name = current_context_name(env)
    if name == "default":
        return DockerEndpoint(host=DEFAULT_ENDPOINT, source="default")
    context_id = hashlib.sha256(name.encode()).hexdigest()
    contexts = docker_config_dir(env) / "contexts"
    meta_file = contexts / "meta" / context_id / "meta.json"
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
        context_host = meta["Endpoints"]["docker"]["Host"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DockerUnavailableError(
            f"the Docker context {name!r}",
            f"its description {meta_file} cannot be read ({exc})",
        ) from None
    tls_dir = contexts / "tls" / context_id / "docker"
    return DockerEndpoint(
        host=str(context_host),
        source=f"context {name}",
        tls_dir=tls_dir if tls_dir.is_dir() else None,
    )


def connect_docker(
    environ: Mapping[str, str] | None = None, *, timeout: float = 60.0
) -> docker.DockerClient:
    """Open a client to the engine and check that it answers."""
    env = dict(os.environ if environ is None else environ)
    endpoint = docker_endpoint(env)
    try:
        if endpoint.source == "DOCKER_HOST":
            # Also honours DOCKER_TLS_VERIFY and DOCKER_CERT_PATH.
            settings = docker.utils.kwargs_from_env(environment=env)
            client = docker.DockerClient(
                timeout=_whole_seconds(timeout), max_pool_size=_CONNECTION_POOL_SIZE, **settings
            )
        else:
            client = docker.DockerClient(
                base_url=endpoint.host,
                tls=_context_tls(endpoint),
                timeout=_whole_seconds(timeout),
                max_pool_size=_CONNECTION_POOL_SIZE,
            )
        # Construction asks the engine for its API version (GET /version), so an engine
        # that does not answer fails here, not in the first run; no ping needed on top.
    except (docker.errors.DockerException, OSError) as exc:
        failure = DockerUnavailableError(_describe(endpoint), root_cause(exc))
    else:
        return client
    _collect_abandoned_sockets()
    raise failure


def _collect_abandoned_sockets() -> None:
    # The docker SDK does not close the socket of a failed unix-socket
    # connection; collect it now, quietly, instead of warning at a random later
    # moment.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def _describe(endpoint: DockerEndpoint) -> str:
    if endpoint.source == "default":
        return endpoint.host
    return f"{endpoint.host}, taken from {endpoint.source}"


def _whole_seconds(timeout: float) -> int:
    # The client takes whole seconds; never round a short timeout down to "no wait".
    return max(1, math.ceil(timeout))


def _context_tls(endpoint: DockerEndpoint) -> docker.tls.TLSConfig | bool:
    """TLS settings of a context: none without TLS material, an error when it is partial."""
    if endpoint.tls_dir is None:
        return False
    files = {path.stem: str(path) for path in endpoint.tls_dir.iterdir() if path.suffix == ".pem"}
    missing = sorted({"ca", "cert", "key"} - files.keys())
    if missing:
        # Falling back to plain TCP would send credentials in the clear: refuse instead.
        raise DockerUnavailableError(
            _describe(endpoint),
            f"its TLS folder {endpoint.tls_dir} lacks {', '.join(f'{m}.pem' for m in missing)}",
        )
    return docker.tls.TLSConfig(
        client_cert=(files["cert"], files["key"]), ca_cert=files["ca"], verify=True
    )


def root_cause(exc: BaseException) -> str:
    """The innermost reason of a connection failure, in a few words."""
    seen: set[int] = set()
    current: BaseException | None = exc
    reason = str(exc)
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.strerror:
            reason = current.strerror
        for arg in getattr(current, "args", ()):
            if isinstance(arg, BaseException):
                current = arg
                break
        else:
            current = current.__cause__ or current.__context__
            continue
    return reason
