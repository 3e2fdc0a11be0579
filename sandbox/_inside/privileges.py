"""The one privilege drop of every in-container supervisor, and its not-dumpable switch."""

import ctypes
import os

_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_CAPABILITY_VERSION_3 = 0x20080522

libc = ctypes.CDLL(None, use_errno=True)
"""The C library, for the system calls :mod:`os` does not offer."""


def make_undumpable() -> None:
    """No ptrace, no ``/proc/<pid>/mem`` or ``environ`` of this process for anyone.

    Set on the process itself rather than trusting the host's ``fs.suid_dumpable``.
    """
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE)")


def drop_to(uid: int, gid: int) -> None:
    """Become ``uid:gid`` for good: no groups, an empty bounding set, no capability left.

    The bounding set is emptied first (that needs CAP_SETPCAP, gone after the uid
    change); ``setresuid`` then clears the permitted and effective sets, and the
    ``capset`` of empty sets makes sure nothing stays inheritable. A uid change
    resets the process's dumpable flag to the host's ``fs.suid_dumpable``: a
    process that keeps secrets after the drop (a reaper) calls
    :func:`make_undumpable` again.
    """
    capability = 0
    while libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) == 0:  # until EINVAL: past the last
        capability += 1
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)  # 0: this process
    if libc.capset(header, (ctypes.c_uint32 * 6)()) != 0:
        raise OSError(ctypes.get_errno(), "capset")
