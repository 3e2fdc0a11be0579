"""One `sandcrew e2b` per module (starting one takes a second; a sandbox, two), the SDK
pointed at it through its environment variables for each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2b_server.helpers import E2bServer, e2b_server


@pytest.fixture(scope="module")
def server() -> Iterator[E2bServer]:
    with e2b_server() as running:
        yield running


@pytest.fixture
def e2b_env(server: E2bServer, monkeypatch: pytest.MonkeyPatch) -> E2bServer:
    """The SDK's variables set to the module's server, as a user exports them."""
    server.point_sdk_here(monkeypatch)
    return server
