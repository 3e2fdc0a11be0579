"""Labels every sandbox container carries, so that orphans can be found and removed."""

from __future__ import annotations

import os
import socket
from functools import cache

PRODUCT_LABEL = "sandcrew.product"
PRODUCT = "sandcrew"
RUN_ID_LABEL = "sandcrew.run-id"
CREATED_AT_LABEL = "sandcrew.created-at"
DEADLINE_LABEL = "sandcrew.deadline"
OWNER_PID_LABEL = "sandcrew.owner-pid"
OWNER_HOST_LABEL = "sandcrew.owner-host"
OWNER_STARTED_LABEL = "sandcrew.owner-started"
"""When the owner process started (clock ticks after boot): a pid the kernel has since
handed to another process does not pass for the owner."""
POOLED_LABEL = "sandcrew.pooled"
"""``"true"`` on containers started ahead of their run by a pool."""

PRODUCT_FILTER = f"{PRODUCT_LABEL}={PRODUCT}"
"""Docker ``label`` filter matching every container sandcrew made."""


@cache
def owner_host() -> str:
    """Where the owner's pid means something: host name, boot and pid namespace.

    Two processes only compare pids when this matches, so a process in another pid
    namespace (a container sharing the engine, a CI job) is never taken for dead.
    """
    return ":".join([socket.gethostname(), _boot_id(), _pid_namespace()])


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as file:
            return file.read().strip()[:8]
    except OSError:
        return "unknown-boot"


def _pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "unknown-pidns"


def process_status(pid: int) -> tuple[str, str] | None:
    """A process's state letter and start time (clock ticks after boot), from ``/proc``;
    ``None`` where it cannot be read (no such process, no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The fields after the command name, which is in parentheses and may hold any byte:
    # the state is the stat's third field, the start time its twenty-second.
    fields = stat[stat.rfind(b")") + 2 :].split()
    if len(fields) < 20:
        return None
    return fields[0].decode("ascii", "replace"), fields[19].decode("ascii", "replace")


@cache
def _started(pid: int) -> str | None:
    """When process ``pid`` started: read once per process (a forked child has its own pid)."""
    status = process_status(pid)
    return None if status is None else status[1]


def container_labels(
    *, run_id: str, created_at: float, deadline: float, pooled: bool = False
) -> dict[str, str]:
    """Labels for a new container; ``deadline`` (unix seconds) is when it is surely orphaned."""
    labels = {
        PRODUCT_LABEL: PRODUCT,
        RUN_ID_LABEL: run_id,
        CREATED_AT_LABEL: str(int(created_at)),
        DEADLINE_LABEL: str(int(deadline) + 1),
        OWNER_PID_LABEL: str(os.getpid()),
        OWNER_HOST_LABEL: owner_host(),
    }
    started = _started(os.getpid())
    if started is not None:
        labels[OWNER_STARTED_LABEL] = started
    if pooled:
        labels[POOLED_LABEL] = "true"
    return labels
