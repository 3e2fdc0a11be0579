"""E2B's control plane: create, connect, get, list, set the timeout of and kill sandboxes.

Every route needs the server's API key (``X-API-KEY``, compared in constant time). The
answers are the JSON of E2B's REST API (``templateID``, ``sandboxID``,
``envdAccessToken`` …) as the SDK's generated client reads it; what the server does not
do (pause, resume, snapshots, metrics, logs, network changes, forks) answers 501 with a
message saying so.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, unquote

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sandcrew.core import environment_problem
from sandcrew.e2b._errors import json_error, not_implemented
from sandcrew.e2b._plane import json_object
from sandcrew.e2b._sandboxes import HostedSandbox, Refusal, SandboxRegistry

ENVD_VERSION = "0.5.7"
"""The envd version the server answers as: octet-stream uploads and the default user, no
file metadata or watch (the SDK turns features on by this number)."""
CLIENT_ID = "sandcrew"
ANY = ["GET", "POST", "PUT", "PATCH", "DELETE"]
Handler = Callable[[Request], Awaitable[Response]]


class ControlPlane:
    """The routes of the control plane, over one :class:`SandboxRegistry`."""

    def __init__(
        self, registry: SandboxRegistry, *, api_key: str, memory_mb: int, cpus: float
    ) -> None:
        self._registry = registry
        self._api_key = api_key.encode()
        self._memory_mb = memory_mb
        self._cpus = cpus

    def routes(self) -> list[Route]:
        served = [
            ("/sandboxes", self._create, ["POST"]),
            ("/v2/sandboxes", self._create, ["POST"]),
            ("/sandboxes", self._list, ["GET"]),
            ("/v2/sandboxes", self._list, ["GET"]),
            ("/sandboxes/{sandbox_id}", self._get, ["GET"]),
            ("/v2/sandboxes/{sandbox_id}", self._get, ["GET"]),
            ("/sandboxes/{sandbox_id}", self._kill, ["DELETE"]),
            ("/sandboxes/{sandbox_id}/timeout", self._set_timeout, ["POST"]),
            ("/sandboxes/{sandbox_id}/connect", self._connect, ["POST"]),
            ("/v2/sandboxes/{sandbox_id}/connect", self._connect, ["POST"]),
            ("/sandboxes/{sandbox_id}/{action:path}", self._unserved, ANY),
            ("/v2/sandboxes/{sandbox_id}/{action:path}", self._unserved, ANY),
        ]
        return [
            Route(path, self._guarded(handler), methods=verbs) for path, handler, verbs in served
        ]

    def _guarded(self, handler: Handler) -> Handler:
        """``handler`` behind the key check, its refusals answered in the SDK's shape."""

        async def answer(request: Request) -> Response:
            if (refused := self.authorized(request)) is not None:
                return refused
            try:
                return await handler(request)
            except Refusal as error:
                return json_error(error.status, error.message)

        return answer

    def authorized(self, request: Request) -> Response | None:
        """None when the request carries the server's key; else the SDK's 401."""
        if key_offered(request.headers, self._api_key):
            return None
        return json_error(
            401, "invalid API key: send the key `sandcrew e2b` printed as E2B_API_KEY"
        )

    async def _create(self, request: Request) -> Response:
        body = await json_object(request)
        template = body.get("templateID") or "code-interpreter-v1"
        if not isinstance(template, str):
            raise Refusal(400, "templateID must be a string")
        for key, what in (
            ("autoPause", "auto-pause"),
            ("mcp", "MCP servers in a sandbox"),
            ("volumeMounts", "volume mounts"),
        ):
            if body.get(key):
                raise Refusal(501, not_implemented(what))
        if body.get("allow_internet_access") is True:
            raise Refusal(
                501,
                not_implemented(
                    "internet access (a sandbox reaches only the hosts of the server's "
                    "--allow-host that network={'allow_out': [...]} names)"
                ),
            )
        metadata = _string_map(body.get("metadata"), "metadata")
        env_vars = _string_map(body.get("envVars"), "envVars")
        problem = environment_problem(env_vars)
        if problem is not None:
            raise Refusal(400, f"envVars: {problem}")
        hosts = self._registry.chosen_hosts(body.get("network"))
        timeout = self._registry.timeout_of(body.get("timeout"))
        hosted = await self._registry.create(
            template, timeout=timeout, metadata=metadata, env_vars=env_vars, hosts=hosts
        )
        return JSONResponse(_created(hosted), status_code=201)

    async def _connect(self, request: Request) -> Response:
        body = await json_object(request)
        hosted = self._registry.get(request.path_params["sandbox_id"])
        if body.get("timeout") is not None:
            timeout = self._registry.timeout_of(body["timeout"])
            if hosted.remaining() < timeout:
                self._registry.set_timeout(hosted, timeout)
        return JSONResponse(_created(hosted), status_code=200)

    async def _get(self, request: Request) -> Response:
        hosted = self._registry.get(request.path_params["sandbox_id"])
        return JSONResponse(self._detail(hosted))

    async def _list(self, request: Request) -> Response:
        query = request.query_params
        states = query.get("state", "running").split(",")
        wanted = _listed_metadata(query.get("metadata"))
        template = query.get("template")
        started_after = _moment(query.get("startedAfter"))
        listed = [
            hosted
            for hosted in ([] if "running" not in states else self._registry.all())
            if wanted.items() <= hosted.metadata.items()
            and (template is None or hosted.template == template)
            and (started_after is None or hosted.started_at > started_after)
        ]
        return JSONResponse([self._detail(hosted) for hosted in listed])

    async def _set_timeout(self, request: Request) -> Response:
        body = await json_object(request)
        hosted = self._registry.get(request.path_params["sandbox_id"])
        if "timeout" not in body:
            raise Refusal(400, "timeout (seconds) is required")
        self._registry.set_timeout(hosted, self._registry.timeout_of(body["timeout"]))
        return Response(status_code=204)

    async def _kill(self, request: Request) -> Response:
        sandbox_id = request.path_params["sandbox_id"]
        if not await self._registry.kill(sandbox_id):
            raise Refusal(404, f"sandbox {sandbox_id} not found")
        return Response(status_code=204)

    async def _unserved(self, request: Request) -> Response:
        action = request.path_params["action"].split("/")[0]
        raise Refusal(501, not_implemented(f"the sandbox API's {action!r}"))

    def _detail(self, hosted: HostedSandbox) -> dict[str, Any]:
        return {
            "templateID": hosted.template,
            "alias": hosted.template,
            "sandboxID": hosted.id,
            "clientID": CLIENT_ID,
            "startedAt": hosted.started_at.isoformat(),
            "endAt": datetime.fromtimestamp(hosted.end_at, UTC).isoformat(),
            "envdVersion": ENVD_VERSION,
            "envdAccessToken": hosted.token,
            "cpuCount": max(1, round(self._cpus)),
            "memoryMB": self._memory_mb,
            "diskSizeMB": 0,
            "state": "running",
            "metadata": hosted.metadata,
        }


def _created(hosted: HostedSandbox) -> dict[str, Any]:
    return {
        "templateID": hosted.template,
        "alias": hosted.template,
        "sandboxID": hosted.id,
        "clientID": CLIENT_ID,
        "envdVersion": ENVD_VERSION,
        "envdAccessToken": hosted.token,
        # The code interpreter's context calls carry only this one: the same token.
        "trafficAccessToken": hosted.token,
        "domain": None,
    }


def key_offered(headers: Mapping[str, str], api_key: bytes) -> bool:
    """Whether ``headers`` carry the server's key (compared in constant time)."""
    return hmac.compare_digest(headers.get("x-api-key", "").encode(), api_key)


def _string_map(value: object, name: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(key, str) and isinstance(item, str) for key, item in value.items()
    ):
        raise Refusal(400, f"{name} must map strings to strings")
    return dict(value)


def _listed_metadata(query: str | None) -> dict[str, str]:
    """The metadata a list asks for: ``k=v&...``, each key and value quoted once more by the
    SDK before the whole was encoded as one query parameter."""
    if not query:
        return {}
    return {unquote(key): unquote(value) for key, value in parse_qsl(query, keep_blank_values=True)}


def _moment(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise Refusal(400, f"startedAfter must be an ISO 8601 time (got {text!r})") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
