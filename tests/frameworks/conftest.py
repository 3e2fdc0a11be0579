"""The framework integrations run real containers: no sandbox container may be left behind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sandbox.helpers import our_containers, shared_client


@pytest.fixture(autouse=True)
def no_leftover_containers() -> Iterator[None]:
    yield
    leftovers = our_containers(shared_client())
    assert not leftovers, f"containers left behind: {leftovers}"
