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
    uid: int, gid: int, inodes: frozenset[int], spared: set[int]
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
        return channel_holders(inodes, [pid for pid in pids if pid not in spared])
    finally:
        libc.setfsuid(0)
        libc.setfsgid(0)


def channel_holders(
    inodes: frozenset[int], pids: list[int], proc: str = "/proc"
) -> set[tuple[int, int, int]]:
    """Every ``(pid, descriptor, inode)`` of the processes ``pids`` (their threads included)
    that holds one of the sockets ``inodes``; a process that has ended meanwhile is left out.

    Raises :class:`PermissionError` when a process's descriptors cannot be read (it made
    itself not dumpable): the check then cannot vouch for the channel.
    """
    found: set[tuple[int, int, int]] = set()
    for pid in pids:
        try:
            threads = os.listdir(f"{proc}/{pid}/task")
        except FileNotFoundError:
            continue
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
