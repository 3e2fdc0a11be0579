"""The E2B-compatible server: its app, its guard, and serving it until SIGTERM or Ctrl-C.

One address serves both of E2B's planes (``E2B_API_URL`` and ``E2B_SANDBOX_URL`` are the
same URL): the control plane (:mod:`._api`) and, told apart by their paths, the code
interpreter (:mod:`._interpreter`) and envd (:mod:`._envd`). Before any route, a body
larger than the server takes is refused (413) unread. When the server stops, every
sandbox is killed and its container removed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

import uvicorn
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response

from sandcrew._http_serving import (
    AsgiApp,
    PromptRequests,
    Receive,
    Scope,
    Send,
    base_url,
    bound_socket,
    bounded_body,
    is_loopback,
)
from sandcrew.core import ConfigurationError
from sandcrew.e2b._api import ControlPlane, key_offered
from sandcrew.e2b._envd import Envd
from sandcrew.e2b._errors import json_error, not_implemented
from sandcrew.e2b._interpreter import Interpreter
from sandcrew.e2b._plane import token_offered
from sandcrew.e2b._sandboxes import WORKDIR, Refusal, SandboxRegistry, Templates
from sandcrew.sandbox import DockerSandbox
from sandcrew.settings import AppSettings

logger = logging.getLogger(__name__)

API_KEY_VARIABLE = "SANDCREW_E2B__API_KEY"
MIN_KEY_CHARS = 16
STOP_GRACE = 10
"""Seconds a stopping server gives the answers in flight before it closes their connections."""
MAX_CONNECTIONS = 256
DATA_IMAGE_NAME = "python-data"
"""The image that serves E2B's templates when it is built (see docs/e2b.md)."""


@dataclass(frozen=True)
class Listening:
    """Where the server listens and the key its clients send: what a user exports."""

    url: str
    api_key: str

    def exports(self) -> list[str]:
        return [
            f"export E2B_API_URL={self.url} E2B_SANDBOX_URL={self.url}",
            f"export E2B_API_KEY={self.api_key}",
        ]


def api_key_for(given: str | None, *, host: str) -> tuple[str, bool]:
    """The server's key and whether it was made here (none given: a fresh random one, so
    that even on loopback another local user's program cannot drive the sandboxes).

    Beyond loopback the key must be given (as ``sandcrew mcp`` needs its token there): a
    server reachable from other machines is set up on purpose, with a key kept for it."""
    if given is None:
        if not is_loopback(host):
            raise ConfigurationError(
                f"listening on {host} needs an API key of your choosing: pass --api-key or "
                f"set {API_KEY_VARIABLE} (clients send it as E2B_API_KEY)"
            )
        return "e2b_" + secrets.token_hex(20), True
    if len(given) < MIN_KEY_CHARS or not given.isascii() or not given.isprintable():
        raise ConfigurationError(
            f"the E2B API key must be at least {MIN_KEY_CHARS} printable ASCII characters"
        )
    return given, False


def build_app(settings: AppSettings, registry: SandboxRegistry, api_key: str) -> Starlette:
    """The server's routes over ``registry``; clients of the control plane send ``api_key``."""
    limits = settings.sessions
    control = ControlPlane(
        registry,
        api_key=api_key,
        memory_mb=settings.sandbox.memory_bytes // (1024 * 1024),
        cpus=settings.sandbox.cpus,
    )
    interpreter = Interpreter(registry, max_cell_timeout=settings.e2b.max_cell_timeout)
    envd = Envd(registry, max_file_bytes=min(limits.max_file_bytes, settings.e2b.max_body_bytes))

    async def unserved(request: Request, error: Exception) -> Response:
        return json_error(404, not_implemented(f"{request.method} {request.url.path}"))

    async def method_not_allowed(request: Request, error: Exception) -> Response:
        return json_error(405, f"{request.method} is not served on {request.url.path}")

    async def failed(request: Request, error: Exception) -> Response:
        logger.exception("%s %s failed", request.method, request.url.path)
        return json_error(500, f"the server failed on this request: {type(error).__name__}")

    return Starlette(
        routes=[*control.routes(), *interpreter.routes(), *envd.routes()],
        exception_handlers={404: unserved, 405: method_not_allowed, Exception: failed},
    )


ANONYMOUS_BODY_BYTES = 64 * 1024
"""The most a request without the server's key or a sandbox's token may send: enough for
any JSON the API takes, so that such clients cannot make the server hold large bodies."""

Credentials = Callable[[Headers], bool]
"""Whether a request's headers carry the server's key or the token of the sandbox named."""


def credentials_of(registry: SandboxRegistry, api_key: str) -> Credentials:
    """The check of either plane's credentials, the same the planes make themselves."""
    key = api_key.encode()

    def carries_credentials(headers: Headers) -> bool:
        if key_offered(headers, key):
            return True
        try:
            hosted = registry.get(headers.get("e2b-sandbox-id", ""))
        except Refusal:
            return False
        return token_offered(hosted, headers)

    return carries_credentials


class BodyGuard:
    """ASGI middleware: a request body over ``max_body_bytes`` is refused unread (413), and
    over :data:`ANONYMOUS_BODY_BYTES` without credentials; anything but HTTP is refused."""

    def __init__(self, app: AsgiApp, *, max_body_bytes: int, credentials: Credentials) -> None:
        self._app = app
        self._max_body_bytes = max_body_bytes
        self._credentials = credentials

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        limit = self._max_body_bytes
        if not self._credentials(Headers(scope=scope)):
            limit = min(limit, ANONYMOUS_BODY_BYTES)
        bounded = await bounded_body(receive, headers, limit)
        if bounded is None:
            message = f"request body larger than the server accepts ({limit} bytes)"
            if limit < self._max_body_bytes:
                message += " without the server's key or the sandbox's access token"
            body = json.dumps({"code": 413, "message": message}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 413,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self._app(scope, bounded, send)


async def serve(
    settings: AppSettings,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    api_key: str | None = None,
    on_listening: Callable[[Listening], None] | None = None,
) -> None:
    """Serve until SIGTERM or Ctrl-C, kill every sandbox, then raise
    :class:`KeyboardInterrupt` (the exit status of a stopped command, 130).

    ``port`` 0 picks a free one; ``on_listening`` gets the URL and the key."""
    key, _ = api_key_for(api_key, host=host)
    # The server's --allow-host entries are a ceiling: each sandbox gets the hosts its
    # create names (one DockerSandbox per choice), none unless it names some.
    ceiling = settings.sandbox.egress
    config = settings.sandbox.model_copy(update={"workdir": WORKDIR, "egress": None})
    sandbox = DockerSandbox(config)
    await sandbox.start()
    networked: dict[tuple[str, ...], DockerSandbox] = {}

    def sandbox_for(hosts: tuple[str, ...]) -> DockerSandbox:
        if not hosts or ceiling is None:
            return sandbox
        if hosts not in networked:
            policy = ceiling.narrowed(hosts)
            networked[hosts] = DockerSandbox(config.model_copy(update={"egress": policy}))
        return networked[hosts]

    templates = Templates(await asyncio.to_thread(_template_image, sandbox))
    registry = SandboxRegistry(
        sandbox_for,
        settings.e2b,
        templates,
        settings.sessions,
        ceiling=ceiling,
    )
    app = BodyGuard(
        build_app(settings, registry, key),
        max_body_bytes=settings.e2b.max_body_bytes,
        credentials=credentials_of(registry, key),
    )
    server = _Server(app, host=host, port=port, on_listening=on_listening, api_key=key)
    try:
        await server.serve()
    finally:
        await registry.aclose()
        for each in (*networked.values(), sandbox):
            await each.aclose()
    if server.interrupted:
        raise KeyboardInterrupt


def _template_image(sandbox: DockerSandbox) -> str:
    """The data image (numpy, pandas, matplotlib) when it is built, else the python image."""
    from sandcrew.sandbox.images import list_images

    for status in list_images(sandbox.client):
        if status.name == DATA_IMAGE_NAME and status.present:
            return status.tag
    return sandbox.config.images["python"]


class _Server(uvicorn.Server):
    """uvicorn on a socket bound here (a port in use is one clear error); SIGTERM and Ctrl-C
    stop it, giving answers in flight :data:`STOP_GRACE` seconds; a second signal at once."""

    def __init__(
        self,
        app: AsgiApp,
        *,
        host: str,
        port: int,
        api_key: str,
        on_listening: Callable[[Listening], None] | None,
    ) -> None:
        super().__init__(
            uvicorn.Config(
                app,
                host=host,
                port=port,
                log_level="warning",
                lifespan="off",
                limit_concurrency=MAX_CONNECTIONS,
                http=PromptRequests,
                timeout_graceful_shutdown=STOP_GRACE,
            )
        )
        self._api_key = api_key
        self._on_listening = on_listening
        self.interrupted = False

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        await super().serve(sockets=sockets or [bound_socket(self.config.host, self.config.port)])

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self._on_listening is not None:
            url = base_url(self.servers[0].sockets[0].getsockname())
            self._on_listening(Listening(url, self._api_key))

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.interrupted = self.interrupted or sig in (signal.SIGINT, signal.SIGTERM)
        super().handle_exit(sig, frame)
