"""What is closed when the process exits: the pools and sessions it opened, and only its own.

Each open pool or session is held here with the way to close it. At interpreter
exit every one is closed, in the process that opened it: a forked child inherits
this table (and the exit hook) but closes nothing of its parent's. Holding also
counts: a kind of thing (sessions) can be capped per process.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class _Held:
    close: Callable[[], None]
    kind: str
    pid: int


_lock = threading.Lock()
_held: dict[int, tuple[object, _Held]] = {}
_hook = {"registered": False}


def hold(owner: object, close: Callable[[], None], *, kind: str, limit: int | None = None) -> bool:
    """Close ``owner`` with ``close`` at exit; False (and not held) when this process already
    holds ``limit`` things of ``kind``."""
    with _lock:
        if limit is not None and held(kind) >= limit:
            return False
        _held[id(owner)] = (owner, _Held(close, kind, os.getpid()))
        if not _hook["registered"]:
            _hook["registered"] = True
            atexit.register(_close_all)
    return True


def release(owner: object) -> None:
    """``owner`` is closed: nothing to do for it at exit."""
    with _lock:
        _held.pop(id(owner), None)


def held(kind: str) -> int:
    """How many things of ``kind`` this process holds open."""
    pid = os.getpid()
    return sum(1 for _, entry in list(_held.values()) if entry.kind == kind and entry.pid == pid)


def _close_all() -> None:
    pid = os.getpid()
    with _lock:
        entries = [entry for _, entry in _held.values() if entry.pid == pid]
    for entry in entries:
        with contextlib.suppress(Exception):
            entry.close()
