"""Per-run uids: each run's program gets a uid of its own, so per-user kernel limits stay its own.

The kernel counts some limits per uid across every container (inotify
instances and watches, ``RLIMIT_NPROC``, message queue bytes). With one shared
uid, one run could exhaust them for all others; a uid drawn at random from
``SandboxConfig.uid_range`` and not in use by another container of this
process avoids that. Two sandcrew processes can still draw the same uid (about
one chance in 40,000 per pair of simultaneous runs with the default range).
"""

from __future__ import annotations

import secrets
import threading

from ._config import SandboxConfig

_lock = threading.Lock()
_in_use: set[int] = set()


def take_run_ids(config: SandboxConfig) -> tuple[int, int]:
    """``(uid, gid)`` for a new container: the fixed ``user``, or a fresh uid from the range."""
    fixed = config.fixed_ids
    if fixed is not None:
        return fixed
    low, high = config.uid_range
    with _lock:
        for _ in range(64):
            uid = low + secrets.randbelow(high - low + 1)
            if uid not in _in_use:
                break
        _in_use.add(uid)
    return uid, uid


def release_run_uid(uid: int) -> None:
    """The container with this uid is gone: another run may draw it."""
    with _lock:
        _in_use.discard(uid)
