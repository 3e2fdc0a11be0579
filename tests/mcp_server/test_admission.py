"""The MCP server's bounds on calls running or waiting: per client and in all."""

from __future__ import annotations

import contextlib

import pytest

from sandcrew.mcp import QueueLimits
from sandcrew.mcp._admission import Admission, QueueFull


def test_calls_are_admitted_within_both_bounds_and_their_places_come_back() -> None:
    admission = Admission(QueueLimits(per_client=2, total=3))
    with contextlib.ExitStack() as held:
        held.enter_context(admission.admitted("a"))
        held.enter_context(admission.admitted("a"))
        with pytest.raises(QueueFull, match="this client already has 2 calls"):
            held.enter_context(admission.admitted("a"))
        held.enter_context(admission.admitted("b"))
        with pytest.raises(QueueFull, match="the server already holds 3 calls"):
            held.enter_context(admission.admitted("c"))
        assert admission.pending == 3
    assert admission.pending == 0
    with admission.admitted("a"):
        assert admission.pending == 1


def test_a_failing_call_gives_its_place_back() -> None:
    admission = Admission(QueueLimits(per_client=1, total=1))
    with pytest.raises(ValueError, match="boom"), admission.admitted("a"):
        raise ValueError("boom")
    with admission.admitted("a"):
        assert admission.pending == 1
