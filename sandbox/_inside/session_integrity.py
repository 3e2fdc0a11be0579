"""Whether the interpreter's channel to the supervisor is still the interpreter's own.

A cell runs in the interpreter, so it can change the interpreter: a cell could
keep a copy of the command descriptor, put something else in its place and
leave a thread or a process that reads the next cells' commands and answers for
them. Before each cell the supervisor looks at every descriptor of every
process of the session's uid (each thread's table too, as a thread may have
one of its own) and wants exactly two of the channel's sockets there: the
command socket on :data:`~.session_channel.COMMANDS_FD` and the message socket
on :data:`~.session_channel.MESSAGES_FD` of the interpreter. Sockets, unlike
pipes, cannot be opened again through ``/proc``, so another process can only
get them from the interpreter itself, which this check then sees.

What no check can see: code that changes the interpreter's own behaviour
(replaces the driver's functions, or reads the command socket from a thread of
the interpreter at the moment the supervisor writes). That is the interpreter's
word, as its output is; see docs/security.md.
"""

from __future__ import annotations

import os
import time

from .privileges import libc

_SOCKET_PREFIX = "socket:["
_ENDED_STATES = frozenset({"Z", "X"})
"""Zombie and dead: a process that holds no descriptors any more."""
_UNREADABLE_TRIES = 10
_UNREADABLE_PAUSE = 0.02
"""How often and how far apart an unreadable process is looked at again before the check
gives up on it (200 ms in all: an exit or an exec in progress)."""


def holders_seen_as(
    uid: int, gid: int, inodes: frozenset[int], spared: set[int], unreadable_ok: set[int]
) -> set[tuple[int, int, int]]:
    """:func:`channel_holders` with file access checked as ``uid:gid`` (``setfsuid``).

    Only the file system identity changes (the supervisor stays root with its few
    capabilities, and stays not dumpable), so a supervisor without CAP_SYS_PTRACE
    may read ``/proc/PID/fd`` of the session's processes.
    """
    libc.setfsgid(gid)
    libc.setfsuid(uid)
    try:
        # Each call returns the identity before it: a second one tells whether the first took.
        if libc.setfsuid(uid) != uid or libc.setfsgid(gid) != gid:
            raise PermissionError("cannot take the session's file system identity (setfsuid)")
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
        checked = [pid for pid in pids if pid not in spared]
        return channel_holders(inodes, checked, uid, unreadable_ok=unreadable_ok)
    finally:
        libc.setfsuid(0)
        libc.setfsgid(0)


def channel_holders(
    inodes: frozenset[int],
    pids: list[int],
    uid: int,
    *,
    unreadable_ok: frozenset[int] | set[int] = frozenset(),
    proc: str = "/proc",
) -> set[tuple[int, int, int]]:
    """Every ``(pid, descriptor, inode)`` of the processes of ``uid`` among ``pids`` (their
    threads included) that holds one of the sockets ``inodes``. A process of another uid (the
    supervisor's own children before they drop to the session's uid) or one that has ended
    meanwhile is left out.

    Raises :class:`PermissionError` when a process's descriptors cannot be read (it made
    itself not dumpable): the check then cannot vouch for the channel. Processes in
    ``unreadable_ok`` (the supervisor's own commands, not dumpable for a moment between
    their drop to the session's uid and their ``exec``) are passed over instead.
    """
    found: set[tuple[int, int, int]] = set()
    for pid in pids:
        for attempt in range(_UNREADABLE_TRIES):
            owner, state = _owner_and_state(f"{proc}/{pid}/status")
            # A zombie holds no descriptors, and its fd folder is unreadable (it has no
            # memory to be dumpable): a forked child its parent never waited for is fine.
            if owner != uid or state in _ENDED_STATES:
                break
            try:
                found |= _holders_in(pid, inodes, proc)
                break
            except PermissionError:
                if pid in unreadable_ok:
                    break
                # A process in the middle of exiting (its memory already gone) or of an
                # exec reads as unreadable for a moment; one that stays so hides something.
                if attempt == _UNREADABLE_TRIES - 1:
                    raise
                time.sleep(_UNREADABLE_PAUSE)
    return found


def _holders_in(pid: int, inodes: frozenset[int], proc: str) -> set[tuple[int, int, int]]:
    found: set[tuple[int, int, int]] = set()
    try:
        threads = os.listdir(f"{proc}/{pid}/task")
    except FileNotFoundError:
        return found
    for thread in threads:
        folder = f"{proc}/{pid}/task/{thread}/fd"
        try:
            descriptors = os.listdir(folder)
        except FileNotFoundError:
            continue
        for descriptor in descriptors:
            try:
                target = os.readlink(f"{folder}/{descriptor}")
            except FileNotFoundError:
                continue
            if target.startswith(_SOCKET_PREFIX):
                inode = int(target[len(_SOCKET_PREFIX) : -1])
                if inode in inodes:
                    found.add((pid, int(descriptor), inode))
    return found


def _owner_and_state(status_path: str) -> tuple[int | None, str | None]:
    """The real uid and the state letter (``R``, ``S``, ``Z`` …) of a process's status file."""
    owner: int | None = None
    state: str | None = None
    try:
        with open(status_path, "rb") as handle:
            for line in handle:
                if line.startswith(b"State:"):
                    state = line.split()[1].decode("ascii", "replace")
                elif line.startswith(b"Uid:"):
                    owner = int(line.split()[1])
                    break  # State comes before Uid
    except (OSError, ValueError, IndexError):
        pass
    return owner, state


def tampering(expected: set[tuple[int, int, int]], found: set[tuple[int, int, int]]) -> str | None:
    """What is wrong with the channel in words, or ``None`` when ``found`` is ``expected``."""
    missing = sorted(expected - found)
    extra = sorted(found - expected)
    if extra:
        pid, descriptor, _ = extra[0]
        return f"process {pid} holds a copy of the channel to the supervisor (fd {descriptor})"
    if missing:
        pid, descriptor, _ = missing[0]
        return f"the interpreter's fd {descriptor} is no longer its channel to the supervisor"
    return None
