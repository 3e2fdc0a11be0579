"""Blocking work in threads that a cancelled caller cannot leave half done (no Docker)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from sandcrew.sandbox._threads import undone_if_cancelled


async def test_what_was_made_while_the_caller_was_cancelled_is_undone() -> None:
    undone: list[str] = []
    release = threading.Event()

    def make() -> str:
        release.wait(5)
        time.sleep(0.05)
        return "container"

    caller = asyncio.ensure_future(undone_if_cancelled(make, undone.append))
    await asyncio.sleep(0.05)
    caller.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await caller

    assert undone == ["container"]


async def test_nothing_is_undone_when_the_caller_waits_or_the_making_fails() -> None:
    undone: list[str] = []

    def fail() -> str:
        raise OSError("no engine")

    made = await undone_if_cancelled(lambda: "container", undone.append)
    with pytest.raises(OSError, match="no engine"):
        await undone_if_cancelled(fail, undone.append)

    assert made == "container"
    assert undone == []
