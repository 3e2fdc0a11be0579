"""Bad input over real HTTP: each gets the SDK's error shape, and nothing of the sandbox is lost."""

from __future__ import annotations

import json
import struct
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from e2b import InvalidArgumentException
from e2b_code_interpreter import Sandbox, SandboxQuery, TimeoutException

from sandcrew._http_serving import REQUEST_HEAD_SECONDS
from sandcrew.e2b._app import MAX_CONNECTIONS
from sandcrew.e2b._sandboxes import MAX_CONTEXTS
from tests.e2b_server.helpers import E2bServer
from tests.slow_clients import closed_by_the_server, open_connection, trickle

pytestmark = pytest.mark.docker


@pytest.fixture
def sandbox(e2b_env: E2bServer) -> Iterator[Sandbox]:
    created = Sandbox.create()
    created.run_code("precious = 'kept'")
    yield created
    assert created.run_code("precious").text == "'kept'", "bad input cost the sandbox its state"
    created.kill()


@pytest.fixture
def http(server: E2bServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def plane_headers(sandbox: Sandbox, **extra: str) -> dict[str, str]:
    token = sandbox._envd_access_token
    assert token is not None
    return {"E2b-Sandbox-Id": sandbox.sandbox_id, "X-Access-Token": token, **extra}


def test_the_control_plane_needs_the_key(http: httpx.Client, server: E2bServer) -> None:
    for headers in ({}, {"X-API-KEY": server.api_key + "x"}, {"X-API-KEY": ""}):
        answer = http.post("/sandboxes", json={"templateID": "base"}, headers=headers)
        assert answer.status_code == 401
        assert "API key" in answer.json()["message"]


def test_bad_json_is_refused(http: httpx.Client, server: E2bServer, sandbox: Sandbox) -> None:
    key = {"X-API-KEY": server.api_key, "Content-Type": "application/json"}
    assert http.post("/v2/sandboxes", content=b"{not json", headers=key).status_code == 400
    assert http.post("/v2/sandboxes", content=b"[1, 2]", headers=key).status_code == 400
    refused = http.post("/execute", content=b"{", headers=plane_headers(sandbox))
    assert refused.status_code == 400
    no_code = http.post("/execute", json={"code": 5}, headers=plane_headers(sandbox))
    assert no_code.status_code == 400


def test_unknown_sandbox_and_wrong_token(http: httpx.Client, sandbox: Sandbox) -> None:
    unknown = plane_headers(sandbox, **{"E2b-Sandbox-Id": "i" + "0" * 20})
    gone = http.post("/execute", json={"code": "1"}, headers=unknown)
    assert gone.status_code == 502
    assert "was not found" in gone.text
    for token in ("wrong", ""):
        wrong = plane_headers(sandbox, **{"X-Access-Token": token})
        assert http.post("/execute", json={"code": "1"}, headers=wrong).status_code == 401
        assert http.get("/files", params={"path": "a"}, headers=wrong).status_code == 401
    no_id = http.get("/health")
    assert no_id.status_code == 400


def test_an_oversized_body_is_refused_unread(http: httpx.Client, sandbox: Sandbox) -> None:
    too_big = b"x" * (49 * 1024 * 1024)
    answer = http.post(
        "/files",
        params={"path": "big.bin"},
        content=too_big,
        headers=plane_headers(sandbox, **{"Content-Type": "application/octet-stream"}),
    )
    assert answer.status_code == 413
    assert not sandbox.files.exists("big.bin")


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"\x00\x00\x00", "torn header"),
        (struct.pack(">BI", 0, 100) + b"{}", "length past the body"),
        (struct.pack(">BI", 1, 2) + b"{}", "compressed"),
        (struct.pack(">BI", 2, 2) + b"{}", "end-of-stream as a request"),
        (struct.pack(">BI", 0, 2) + b"[]", "not an object"),
        (struct.pack(">BI", 0, 2) + b"{}" + b"trailing", "bytes after the message"),
    ],
)
def test_hostile_connect_frames_end_the_stream_with_an_error(
    http: httpx.Client, sandbox: Sandbox, body: bytes, why: str
) -> None:
    answer = http.post(
        "/process.Process/Start",
        content=body,
        headers=plane_headers(sandbox, **{"Content-Type": "application/connect+json"}),
    )
    assert answer.status_code == 200, why
    flags, length = struct.unpack(">BI", answer.content[:5])
    assert flags == 2, why
    assert b'"error"' in answer.content[5 : 5 + length], why


def test_traversal_through_rpc_and_files(http: httpx.Client, sandbox: Sandbox) -> None:
    headers = plane_headers(sandbox, **{"Content-Type": "application/json"})
    for path in ("../../etc/passwd", "/home/user/../../etc/passwd", "/proc/self/environ"):
        stat = http.post("/filesystem.Filesystem/Stat", json={"path": path}, headers=headers)
        assert stat.status_code == 400
        assert stat.json()["code"] == "invalid_argument"
        read = http.get("/files", params={"path": path}, headers=plane_headers(sandbox))
        assert read.status_code == 400


def test_a_client_gone_mid_cell_interrupts_it(sandbox: Sandbox, server: E2bServer) -> None:
    with (
        httpx.Client(base_url=server.url, timeout=30) as client,
        client.stream(
            "POST",
            "/execute",
            json={"code": "import time\nstarted = True\nprint('go', flush=True)\ntime.sleep(600)"},
            headers=plane_headers(sandbox),
        ) as answer,
    ):
        for line in answer.iter_lines():
            assert '"go' in line
            break
    # The connection is closed: the cell was interrupted, the namespace is the same.
    after = sandbox.run_code("started", timeout=60)
    assert after.text == "True"


def test_a_list_keeps_to_the_metadata_asked_for(e2b_env: E2bServer) -> None:
    alice = Sandbox.create(metadata={"owner": "alice", "team": "a&b=c"})
    bob = Sandbox.create(metadata={"owner": "bob"})
    try:

        def listed(**metadata: str) -> set[str]:
            query = SandboxQuery(metadata=metadata)
            return {info.sandbox_id for info in Sandbox.list(query=query).next_items()}

        assert listed(owner="alice") == {alice.sandbox_id}
        assert listed(owner="alice", team="a&b=c") == {alice.sandbox_id}
        assert listed(owner="bob") == {bob.sandbox_id}
        assert listed(owner="carol") == set()
        assert {alice.sandbox_id, bob.sandbox_id} <= listed()
    finally:
        alice.kill()
        bob.kill()


def test_a_queued_cell_given_up_leaves_the_running_cell_alone(sandbox: Sandbox) -> None:
    first: list[object] = []
    begun = threading.Event()
    code = "import time\nprint('first begins', flush=True)\ntime.sleep(5)\nprint('first done')"
    running = threading.Thread(
        target=lambda: first.append(
            sandbox.run_code(code, timeout=60, on_stdout=lambda _: begun.set())
        )
    )
    running.start()
    try:
        assert begun.wait(60), "the first cell never began"
        # Queued behind the first cell, whose client keeps waiting; this one gives up.
        with pytest.raises(TimeoutException):
            sandbox.run_code("print('second')", timeout=2)
    finally:
        running.join(60)
    [execution] = first
    assert execution.error is None, execution.error  # type: ignore[attr-defined]
    assert execution.logs.stdout == ["first begins\n", "first done\n"]  # type: ignore[attr-defined]


def test_lone_surrogates_in_code_and_output_come_back_as_errors(
    http: httpx.Client, sandbox: Sandbox
) -> None:
    raised = sandbox.run_code("raise ValueError('\\ud800')")
    assert raised.error is not None
    assert (raised.error.name, raised.error.value) == ("ValueError", "\ud800")
    # The SDK cannot send such code (httpx encodes it as UTF-8); a JSON escape can.
    headers = plane_headers(sandbox, **{"Content-Type": "application/json"})
    sent = http.post("/execute", content=b'{"code": "text = \'\\ud800\'"}', headers=headers)
    assert sent.status_code == 200
    [line] = [json.loads(text) for text in sent.text.splitlines()]
    assert (line["type"], line["name"]) == ("error", "ValueError")
    assert "surrogate" in line["value"]


def test_timeouts_that_are_not_finite_numbers_are_refused(
    http: httpx.Client, server: E2bServer, sandbox: Sandbox
) -> None:
    key = {"X-API-KEY": server.api_key, "Content-Type": "application/json"}
    at = f"/sandboxes/{sandbox.sandbox_id}/timeout"
    for value in (b"NaN", b"Infinity", b"-Infinity"):
        create = http.post("/sandboxes", content=b'{"templateID":"base","timeout":' + value + b"}")
        assert create.status_code == 401  # no key: refused before anything else
        create = http.post(
            "/sandboxes", content=b'{"templateID":"base","timeout":' + value + b"}", headers=key
        )
        assert create.status_code == 400, value
        assert http.post(at, content=b'{"timeout":' + value + b"}", headers=key).status_code == 400
    # Larger than any float: the server's longest life, as for any timeout past it.
    huge = b"1" + b"0" * 400
    assert http.post(at, content=b'{"timeout":' + huge + b"}", headers=key).status_code == 204
    assert http.get("/v2/sandboxes", headers=key).status_code == 200
    assert http.get(f"/sandboxes/{sandbox.sandbox_id}", headers=key).status_code == 200


def test_values_of_the_wrong_kind_are_refused(
    http: httpx.Client, server: E2bServer, sandbox: Sandbox
) -> None:
    key = {"X-API-KEY": server.api_key}
    for denied in ([{}], [["0.0.0.0/0"]]):
        network = {"templateID": "base", "network": {"denyOut": denied}}
        assert http.post("/sandboxes", json=network, headers=key).status_code == 400
    for context_id in ([], {}, 5):
        cell = {"code": "1", "context_id": context_id}
        assert http.post("/execute", json=cell, headers=plane_headers(sandbox)).status_code == 400


def test_without_credentials_only_a_small_body_is_read(
    http: httpx.Client, server: E2bServer, sandbox: Sandbox
) -> None:
    body = b"x" * (100 * 1024)
    for headers in ({}, {"X-API-KEY": "not-the-key-0123456789"}):
        refused = http.post("/sandboxes", content=body, headers=headers)
        assert refused.status_code == 413
        assert "key" in refused.json()["message"]
    wrong_token = plane_headers(sandbox, **{"X-Access-Token": "wrong"})
    assert (
        http.post("/files", params={"path": "a"}, content=body, headers=wrong_token).status_code
        == 413
    )
    # With the key or the token the same body is read (and found to be no JSON, or written).
    key = {"X-API-KEY": server.api_key, "Content-Type": "application/json"}
    assert http.post("/sandboxes", content=body, headers=key).status_code == 400
    written = http.post(
        "/files", params={"path": "a.bin"}, content=body, headers=plane_headers(sandbox)
    )
    assert written.status_code == 200
    assert sandbox.files.read("a.bin", format="bytes") == body


def test_silent_and_trickling_connections_are_closed_and_lock_no_one_out(
    http: httpx.Client, server: E2bServer
) -> None:
    key = {"X-API-KEY": server.api_key}
    silent = [open_connection(server.url) for _ in range(MAX_CONNECTIONS)]
    trickling = open_connection(server.url)
    try:
        trickle(trickling)
        time.sleep(0.5)
        # Every connection slot is held: a client with the key is turned away for now.
        assert http.get("/v2/sandboxes", headers=key).status_code == 503
        within = REQUEST_HEAD_SECONDS + 10
        started = time.monotonic()
        for connection in [*silent, trickling]:
            left = max(within - (time.monotonic() - started), 0.1)
            assert closed_by_the_server(connection, within=left)
        assert http.get("/v2/sandboxes", headers=key).status_code == 200
    finally:
        for connection in [*silent, trickling]:
            connection.close()


def test_environment_variables_no_process_can_have_are_refused(
    http: httpx.Client, server: E2bServer, sandbox: Sandbox
) -> None:
    key = {"X-API-KEY": server.api_key}
    for env in ({"": "x"}, {"A=B": "1"}, {"A": "1\0"}):
        create = {"templateID": "base", "envVars": env}
        refused = http.post("/sandboxes", json=create, headers=key)
        assert refused.status_code == 400
        assert "environment variable" in refused.json()["message"]
    with pytest.raises(InvalidArgumentException, match="environment variable"):
        sandbox.commands.run("true", envs={"A=B": "1"})
    assert sandbox.commands.run("echo $A", envs={"A": "fine"}).stdout == "fine\n"


def test_a_sandbox_holds_a_bounded_number_of_contexts(http: httpx.Client, sandbox: Sandbox) -> None:
    headers = plane_headers(sandbox)
    made = []
    for _ in range(MAX_CONTEXTS - 1):  # the default context is one of them
        answer = http.post("/contexts", json={"language": "python"}, headers=headers)
        assert answer.status_code == 200
        made.append(answer.json()["id"])
    refused = http.post("/contexts", json={"language": "python"}, headers=headers)
    assert refused.status_code == 429
    assert f"at most {MAX_CONTEXTS}" in refused.text
    assert http.delete(f"/contexts/{made[0]}", headers=headers).status_code == 204
    again = http.post("/contexts", json={"language": "python"}, headers=headers)
    assert again.status_code == 200
