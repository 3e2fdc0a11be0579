"""Ending processes and removing what they left: every supervisor's way to finish a run.

- :func:`end_every_other_process`: the one-program supervisor (root, the only
  other process of its container) kills everything but itself.
- :func:`end_own_processes`: a process that dropped to a batch task's uid kills
  every process of that uid (``kill(-1)`` as that uid reaches exactly them).
- :func:`remove_own_ipc_objects`: the task's SysV shared memory, message queues
  and semaphores, which outlive their processes.
- :func:`remove_entry`: the task's files, deleted without recursion (a tree
  of any depth) and within a time bound.
- :func:`wait_until_reaped`: the task's killed processes given back to the
  container's process limit (PID 1 reaps them).

Everything here runs in the container, the batch parts as the task's uid after
every process of it is gone, so nothing moves under them.
"""

import ctypes
import errno
import os
import stat
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
else:
    import _signal as signal  # as in .supervisor: signal's enums cost a new container ~10 ms

# Its own handle on the C library: this module stands alone (tests run its source as a
# program inside a container).
libc = ctypes.CDLL(None, use_errno=True)
_IPC_RMID = 0
_IPC_KINDS = ("shm", "msg", "sem")


def end_every_other_process(within: float) -> None:
    """As root: SIGKILL every process but PID 1 and this one, and reap them, until none is left."""
    give_up = time.monotonic() + within
    while time.monotonic() < give_up:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:  # none is left
            return
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.002)


def has_processes(uid: int, *, counting_zombies: bool = False) -> bool:
    """Whether a process of ``uid`` other than this one exists (zombies only when counted).

    A zombie no longer runs, but it holds its pid (and its place under the
    container's process limit) until its parent reaps it.
    """
    itself = str(os.getpid())
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == itself:
            continue
        try:
            if os.stat("/proc/" + name).st_uid != uid:
                continue
            with open("/proc/" + name + "/stat", "rb") as handle:
                state = handle.read().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if counting_zombies or state not in (b"Z", b"X"):
            return True
    return False


def wait_until_reaped(uid: int, until: float) -> bool:
    """Whether every process of ``uid``, zombies included, is gone by the monotonic ``until``."""
    while has_processes(uid, counting_zombies=True):
        if time.monotonic() >= until:
            return False
        time.sleep(0.002)
    return True


def end_own_processes(uid: int, within: float) -> bool:
    """After dropping to ``uid``: SIGKILL every process of it; whether none is left in time."""
    give_up = time.monotonic() + within
    while time.monotonic() < give_up:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return True
        if not has_processes(uid):
            return True  # zombies only: killed, waiting for their parent
        time.sleep(0.001)
    return not has_processes(uid)


def ipc_objects_of(table: str, uid: int) -> list[int]:
    """The ids in a ``/proc/sysvipc/*`` table of the objects ``uid`` owns or created."""
    lines = table.splitlines()
    if not lines:
        return []
    columns = lines[0].split()
    key = "shmid" if "shmid" in columns else "msqid" if "msqid" in columns else "semid"
    found: list[int] = []
    for line in lines[1:]:
        row = dict(zip(columns, line.split(), strict=False))
        if str(uid) in (row.get("uid"), row.get("cuid")) and key in row:
            found.append(int(row[key]))
    return found


def remove_own_ipc_objects(uid: int) -> bool:
    """As ``uid``: remove its SysV IPC objects (owner or creator may); whether none is left."""
    removers = {
        "shm": lambda ident: libc.shmctl(ident, _IPC_RMID, None),
        "msg": lambda ident: libc.msgctl(ident, _IPC_RMID, None),
        "sem": lambda ident: libc.semctl(ident, 0, _IPC_RMID),
    }
    left = False
    for kind in _IPC_KINDS:
        try:
            with open("/proc/sysvipc/" + kind, encoding="ascii") as handle:
                table = handle.read()
        except OSError:
            continue  # no SysV IPC in this kernel
        for ident in ipc_objects_of(table, uid):
            if removers[kind](ident) != 0 and ctypes.get_errno() not in (errno.EINVAL, errno.EIDRM):
                left = True
    return not left


def owned_entries(folder: str, uid: int) -> list[str]:
    """The names directly in ``folder`` that belong to ``uid`` (never following a link)."""
    try:
        with os.scandir(folder) as entries:
            return [
                entry.name for entry in entries if entry.stat(follow_symlinks=False).st_uid == uid
            ]
    except OSError:
        return []


def _open_folder(name: str, parent: int) -> int:
    """Open a folder of the task's to empty it, with its owner's rights given back.

    The task may have taken its own rights away (0o000 cannot be opened, 0o500 can
    be listed but nothing in it deleted); the reaper runs as the same uid, so it may
    give them back.
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        folder = os.open(name, flags, dir_fd=parent)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=parent)
        return os.open(name, flags, dir_fd=parent)
    if stat.S_IMODE(os.fstat(folder).st_mode) & 0o700 != 0o700:
        try:
            os.fchmod(folder, 0o700)
        except BaseException:
            os.close(folder)
            raise
    return folder


def _unlink(name: str, folder: int) -> bool:
    """Remove a non-folder entry; False when it is a folder."""
    try:
        os.unlink(name, dir_fd=folder)
    except IsADirectoryError:
        return False
    except FileNotFoundError:
        pass
    except PermissionError:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            return False
        raise
    return True


def _unlink_files(folder: int, give_up: float) -> list[str]:
    """Remove every non-folder entry of ``folder``; the subfolders left. Raises
    :class:`TimeoutError` past ``give_up`` (one folder may hold a million files)."""
    subfolders = []
    for count, entry in enumerate(os.listdir(folder), start=1):
        if not _unlink(entry, folder):
            subfolders.append(entry)
        if count % 1024 == 0 and time.monotonic() > give_up:
            raise TimeoutError("the task's files were not deleted in time")
    return subfolders


def remove_entry(folder: str, name: str, give_up: float) -> None:
    """Delete ``folder/name`` and everything under it, without recursion and by ``give_up``.

    One folder is open at a time: the walk goes down with ``openat(name)`` and
    back up with ``openat("..")``, so the depth of the tree costs neither stack
    nor descriptors. Raises :class:`TimeoutError` past ``give_up`` and
    :class:`OSError` when something cannot be deleted.
    """
    # O_PATH: the workdir may not be readable by the task's uid (only searchable).
    top = os.open(folder, os.O_PATH | os.O_DIRECTORY)
    try:
        if _unlink(name, top):
            return
        current = _open_folder(name, top)
    except BaseException:
        os.close(top)
        raise
    # From the top down to the current folder: its name and the subfolders still to empty
    # (None until it is listed; each folder is listed once).
    path: list[tuple[str, list[str] | None]] = [(name, None)]
    try:
        while path:
            if time.monotonic() > give_up:
                raise TimeoutError("the task's files were not deleted in time")
            emptied, pending = path[-1]
            if pending is None:
                pending = _unlink_files(current, give_up)
                path[-1] = (emptied, pending)
            if pending:
                subfolder = pending.pop()
                below = _open_folder(subfolder, current)
                os.close(current)
                current = below
                path.append((subfolder, None))
                continue
            path.pop()
            if path:
                above = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=current)
                os.close(current)
                current = above
                os.rmdir(emptied, dir_fd=current)
            else:
                os.close(current)
                current = -1
                os.rmdir(emptied, dir_fd=top)
    finally:
        if current >= 0:
            os.close(current)
        os.close(top)
