"""Run uids leased host-wide: no two live sandbox containers on one host share a uid.

The kernel counts some limits per uid across every container (``RLIMIT_NPROC``,
inotify instances and watches, message queue bytes). Two programs with the same
uid at the same time share them, so a fork bomb in one takes the other's
processes. Each run's program therefore gets a uid of its own, and a batch
container a block of consecutive uids (one per task), from
``SandboxConfig.uid_range``.

A lease is a POSIX record lock on the bytes ``[uid, uid + count)`` of one lock
file in the host's temporary directory that every sandcrew process opens: the
kernel refuses a lock that overlaps one another process holds, and drops a
process's locks when it ends, however it ends, so a killed sandcrew never keeps
a uid. Record locks do not conflict within one process, so this process's own
leases are also kept in a table. Where the lock file cannot be opened, leases
hold within this process only, and a warning says so (on Windows, which has no
record locks, they always do).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from ._config import SandboxConfig
from ._errors import SandboxError

if sys.platform != "win32":
    import fcntl

LEASE_FILE_NAME = "sandcrew-uids.lock"
"""The lock file every sandcrew process on the host leases uids in (in the temp directory)."""

_RANDOM_TRIES = 64  # random starts before the range is searched in order
_log = logging.getLogger("sandcrew.sandbox")

_lock = threading.Lock()
_leases: dict[int, int] = {}  # first uid -> count, this process's leases
_lease_file: int | None = None
_lease_file_problem: str | None = None  # why the lease file could not be opened


def take_run_ids(config: SandboxConfig) -> tuple[int, int]:
    """``(uid, gid)`` for a new container: the fixed ``user``, or a uid leased from the range."""
    fixed = config.fixed_ids
    if fixed is not None:
        return fixed
    uid = take_uid_block(config, 1)
    return uid, uid


def uids_per_block(config: SandboxConfig, wanted: int) -> int:
    """How many uids a block of ``wanted`` gets from ``config``'s range (at most all of it)."""
    low, high = config.uid_range
    return min(wanted, high - low + 1)


def take_uid_block(config: SandboxConfig, count: int) -> int:
    """The first of ``count`` consecutive uids of ``config.uid_range`` that no live container has.

    Raises :class:`SandboxError` when every such block is leased (by this
    process or another on the host).
    """
    low, high = config.uid_range
    if not 1 <= count <= high - low + 1:
        raise ValueError(f"cannot lease {count} uids from the range {low}-{high}")
    last_start = high - count + 1
    with _lock:
        lease_file = _open_lease_file()
        for _ in range(_RANDOM_TRIES):
            start = low + secrets.randbelow(last_start - low + 1)
            if _try_lease(lease_file, start, count):
                return start
        # A crowded range: look at every start in order (a block's eighth apart).
        for start in range(low, last_start + 1, max(1, count // 8)):
            if _try_lease(lease_file, start, count):
                return start
    taken = (
        f"Every run uid of the range {low}-{high} is in use"
        if count == 1
        else f"No {count} consecutive run uids of the range {low}-{high} are free (a batch "
        "container needs them): the rest are in use"
    )
    raise SandboxError(
        f"{taken} by the sandbox containers on this host; wait for some to end, "
        "or give a larger uid_range",
        retryable=True,
    )


def release_run_uid(uid: int) -> None:
    """The container whose program ran as ``uid`` (or whose block starts there) is gone."""
    with _lock:
        count = _leases.pop(uid, None)
        if count is not None and _lease_file is not None:
            fcntl.lockf(_lease_file, fcntl.LOCK_UN, count, uid, os.SEEK_SET)


@contextlib.contextmanager
def released_on_error(uid: int) -> Iterator[None]:
    """Give ``uid``'s lease back if the container it was taken for is not made after all."""
    try:
        yield
    except BaseException:
        release_run_uid(uid)
        raise


def describe_uid_leases() -> tuple[bool, str]:
    """Whether run uids are leased host-wide in this process, and through which file."""
    with _lock:
        opened = _open_lease_file()
    path = _lease_file_path()
    if opened is not None:
        return True, f"host-wide, through {path}"
    why = _lease_file_problem or "no record locks on this system"
    return False, f"within each process only: cannot open {path} ({why})"


def _forget_parent_leases() -> None:
    """In a forked child: the parent's leases are the parent's (its locks were not inherited)."""
    global _lock
    _lock = threading.Lock()
    _leases.clear()


os.register_at_fork(
    before=lambda: _lock.acquire(),
    after_in_parent=lambda: _lock.release(),
    after_in_child=_forget_parent_leases,
)


def _try_lease(lease_file: int | None, start: int, count: int) -> bool:
    end = start + count
    if any(first < end and start < first + taken for first, taken in _leases.items()):
        return False
    if lease_file is not None:
        try:
            fcntl.lockf(lease_file, fcntl.LOCK_EX | fcntl.LOCK_NB, count, start, os.SEEK_SET)
        except OSError as error:
            if error.errno in (errno.EACCES, errno.EAGAIN):
                return False  # another process holds part of it
            raise
    _leases[start] = count
    return True


def _lease_file_path() -> Path:
    return Path(tempfile.gettempdir()) / LEASE_FILE_NAME


def _open_lease_file() -> int | None:
    global _lease_file, _lease_file_problem
    if sys.platform == "win32":
        return None  # no record locks there
    if _lease_file is None and _lease_file_problem is None:
        path = _lease_file_path()
        try:
            _lease_file = _open_shared(path)
        except OSError as error:
            _lease_file_problem = error.strerror or repr(error)
            _log.warning(
                "cannot open %s (%s): run uids are kept apart within this process only, "
                "so a sandbox of another sandcrew process on this host may share one",
                path,
                _lease_file_problem,
            )
    return _lease_file


def _open_shared(path: Path) -> int:
    """Open (or make, writable by every user) the lease file; never through a link."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    while True:
        try:
            descriptor = os.open(path, flags)
        except FileNotFoundError:
            try:
                # O_CREAT only when it is missing: a sticky /tmp (protected_regular)
                # refuses O_CREAT on another user's file even when it exists.
                descriptor = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                continue
            os.fchmod(descriptor, 0o666)  # past the umask: every user's sandcrew leases here
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            os.close(descriptor)
            raise OSError(errno.EINVAL, "not a regular file")
        return descriptor
