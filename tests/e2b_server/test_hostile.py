"""Bad input over real HTTP: each gets the SDK's error shape, and nothing of the sandbox is lost."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import httpx
import pytest
from e2b_code_interpreter import Sandbox

from tests.e2b_server.helpers import E2bServer

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
