"""A scripted OpenAI-compatible model server on a loopback port, run in a background thread.

It speaks ``POST /v1/chat/completions`` (JSON or SSE streaming, tool calls, usage) and
``GET /v1/models``, answers from a script of :class:`Turn` s, and records every request.
A request no remaining turn matches gets HTTP 500 (with ``x-should-retry: false`` so clients
do not hammer it) and is recorded as a failure: :meth:`ScriptedModelServer.assert_all_used`
and leaving the ``with`` block raise on it, so a test cannot pass by accident.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sandcrew.agents import AGENT_HEADER
from sandcrew.testing._responses import completion_body, error_body, sse, stream_chunks
from sandcrew.testing._script import Turn, last_message_text, load_script
from sandcrew.testing._templates import StrictTemplate


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received, with the turn that answered it (``None`` if none)."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    agent: str | None
    turn: Turn | None = None
    status: int = 200
    template_objection: str | None = None
    """The strict template's error when it refused the request (see :class:`StrictTemplate`)."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages")
        return list(messages) if isinstance(messages, list) else []


@dataclass
class _Slot:
    turn: Turn
    remaining: int


@dataclass
class _State:
    slots: list[_Slot] = field(default_factory=list)
    requests: list[RecordedRequest] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


class ScriptedModelServer:
    """A real HTTP server answering Chat Completions requests from a script.

    Use it as a context manager (or call :meth:`start`/:meth:`stop`); ``base_url`` ends in
    ``/v1`` and can be given to any OpenAI client. ``require_all_used`` makes leaving the
    ``with`` block also fail when scripted turns were never requested. With
    ``strict_template`` the server refuses requests whose turn structure that template
    refuses, before any turn is matched (such requests are recorded, not failures).
    """

    def __init__(
        self,
        turns: Iterable[Turn | Mapping[str, Any]] = (),
        *,
        require_all_used: bool = True,
        strict_template: StrictTemplate | None = None,
        port: int = 0,
    ) -> None:
        self.require_all_used = require_all_used
        self.strict_template = strict_template
        self.port = port
        """The loopback port to listen on (0: a free one, which ``base_url`` names)."""
        self._lock = threading.Lock()
        self._state = _State()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.add(*turns)

    @classmethod
    def from_file(cls, path: str | Path, *, require_all_used: bool = True) -> ScriptedModelServer:
        """A server answering from a YAML or JSON script file."""
        return cls(load_script(path), require_all_used=require_all_used)

    # --- script -----------------------------------------------------------------------------

    def add(self, *turns: Turn | Mapping[str, Any]) -> ScriptedModelServer:
        """Append turns to the script (objects or mappings with the same fields)."""
        parsed = [t if isinstance(t, Turn) else Turn.model_validate(t) for t in turns]
        with self._lock:
            self._state.slots.extend(_Slot(turn, turn.times) for turn in parsed)
        return self

    def reply(
        self, content: str, *, agent: str | None = None, **fields: Any
    ) -> ScriptedModelServer:
        """Shorthand for ``add(Turn(content=..., agent=..., **fields))``."""
        return self.add(Turn(content=content, agent=agent, **fields))

    def unused_turns(self) -> list[Turn]:
        with self._lock:
            return [slot.turn for slot in self._state.slots if slot.remaining > 0]

    # --- what happened ----------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order."""
        with self._lock:
            return list(self._state.requests)

    def requests_for(self, agent: str) -> list[RecordedRequest]:
        """The requests whose ``X-Sandcrew-Agent`` header names ``agent``."""
        return [request for request in self.requests if request.agent == agent]

    @property
    def failures(self) -> list[str]:
        """Descriptions of requests the script could not answer."""
        with self._lock:
            return list(self._state.failures)

    def clear_failures(self) -> None:
        """Forget recorded failures (for tests that provoke them on purpose)."""
        with self._lock:
            self._state.failures.clear()

    def assert_all_used(self) -> None:
        """Raise ``AssertionError`` on any unexpected request or any turn never requested."""
        problems = self.failures
        unused = self.unused_turns()
        if unused:
            problems.append(
                f"{len(unused)} scripted turn(s) never requested: "
                + "; ".join(turn.describe() for turn in unused)
            )
        if problems:
            raise AssertionError("scripted model server: " + "\n".join(problems))

    # --- lifecycle --------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the scripted model server is not started; use `with server:`")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> ScriptedModelServer:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = ThreadingHTTPServer(("127.0.0.1", self.port), _make_handler(self))
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="scripted-model-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
        if exc_info[1] is None:
            if self.require_all_used:
                self.assert_all_used()
            elif self.failures:
                raise AssertionError("scripted model server: " + "\n".join(self.failures))

    # --- request handling (called from server threads) --------------------------------------

    def _take_turn(self, body: Mapping[str, Any], agent: str | None) -> Turn | None:
        with self._lock:
            for slot in self._state.slots:
                if slot.remaining > 0 and slot.turn.matches(body, agent):
                    slot.remaining -= 1
                    return slot.turn
        return None

    def _record(self, request: RecordedRequest, failure: str | None = None) -> None:
        with self._lock:
            self._state.requests.append(request)
            if failure is not None:
                self._state.failures.append(failure)

    def _unexpected(self, body: Mapping[str, Any], agent: str | None) -> str:
        remaining = "; ".join(turn.describe() for turn in self.unused_turns()) or "none"
        last = last_message_text(body)[:120]
        return (
            f"no scripted turn matches request #{len(self.requests) + 1} "
            f"(agent={agent!r}, last message={last!r}); remaining turns: {remaining}"
        )

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)


def _make_handler(server: ScriptedModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean; requests are recorded instead

        def _send_json(
            self, status: int, payload: Mapping[str, Any], headers: Mapping[str, str] = {}
        ) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _send_raw(self, status: int, text: str, content_type: str) -> None:
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _headers(self) -> dict[str, str]:
            return {key.lower(): value for key, value in self.headers.items()}

        def do_GET(self) -> None:
            headers = self._headers()
            agent = headers.get(AGENT_HEADER.lower())
            if self.path.rstrip("/") == "/v1/models":
                server._record(RecordedRequest("GET", self.path, headers, {}, agent))
                self._send_json(
                    200,
                    {
                        "object": "list",
                        "data": [{"id": "scripted", "object": "model", "owned_by": "sandcrew"}],
                    },
                )
                return
            self._not_found("GET", headers, agent)

        def _not_found(self, method: str, headers: dict[str, str], agent: str | None) -> None:
            failure = f"unexpected {method} {self.path} (the server speaks /v1/chat/completions)"
            server._record(
                RecordedRequest(method, self.path, headers, {}, agent, None, 404), failure
            )
            self._send_json(404, error_body(failure, "not_found"), {"x-should-retry": "false"})

        def do_POST(self) -> None:
            headers = self._headers()
            agent = headers.get(AGENT_HEADER.lower())
            length = int(headers.get("content-length", "0") or 0)
            raw = self.rfile.read(length) if length else b""
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._not_found("POST", headers, agent)
                return
            try:
                body = json.loads(raw or b"{}")
                if not isinstance(body, dict):
                    raise ValueError("the body must be a JSON object")
            except ValueError as error:
                failure = f"request body is not valid JSON: {error}"
                server._record(
                    RecordedRequest("POST", self.path, headers, {}, agent, None, 400), failure
                )
                self._send_json(400, error_body(failure, "invalid_request_error"))
                return

            template = server.strict_template
            objection = template.objection(body) if template is not None else None
            if template is not None and objection is not None:
                refused = 200 if template.answer == "empty" else template.status
                server._record(
                    RecordedRequest(
                        "POST", self.path, headers, body, agent, None, refused, objection
                    )
                )
                if template.answer == "empty":
                    empty = completion_body(Turn(content=""), body, len(server.requests))
                    self._send_json(200, empty)
                else:
                    self._send_json(refused, error_body(objection, "invalid_request_error"))
                return

            turn = server._take_turn(body, agent)
            if turn is None:
                failure = server._unexpected(body, agent)
                server._record(
                    RecordedRequest("POST", self.path, headers, body, agent, None, 500), failure
                )
                self._send_json(
                    500,
                    error_body(f"ScriptedModelServer: {failure}", "scripted_server_error"),
                    {"x-should-retry": "false"},
                )
                return

            status = turn.status or 200
            server._record(RecordedRequest("POST", self.path, headers, body, agent, turn, status))
            request_number = len(server.requests)
            server._wait(turn.delay)
            if turn.raw_body is not None:
                self._send_raw(status, turn.raw_body, turn.content_type or "text/plain")
                return
            if turn.status is not None:
                extra = {}
                if turn.retry_after is not None:
                    extra["retry-after-ms"] = str(int(turn.retry_after * 1000))
                self._send_json(
                    turn.status, error_body(turn.error_message, "scripted_error"), extra
                )
                return
            try:
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    self.end_headers()
                    for piece in sse(stream_chunks(turn, body, request_number)):
                        self.wfile.write(piece)
                        self.wfile.flush()
                else:
                    self._send_json(200, completion_body(turn, body, request_number))
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (e.g. its timeout fired during a scripted delay)

    return Handler
