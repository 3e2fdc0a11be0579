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

from .privileges import libc

_SOCKET_PREFIX = "socket:["


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
        if _real_uid(f"{proc}/{pid}/status") != uid:
            continue
        try:
            found |= _holders_in(pid, inodes, proc)
        except PermissionError:
            if pid not in unreadable_ok:
                raise
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


def _real_uid(status_path: str) -> int | None:
    try:
        with open(status_path, "rb") as handle:
            for line in handle:
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


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
