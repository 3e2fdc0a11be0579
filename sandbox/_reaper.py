"""Removing sandbox containers left behind by crashed or killed sandcrew processes."""

from __future__ import annotations

import os
import time

import docker
import docker.errors

from ._docker_client import root_cause
from ._errors import DockerUnavailableError, SandboxError
from ._labels import (
    DEADLINE_LABEL,
    OWNER_HOST_LABEL,
    OWNER_PID_LABEL,
    OWNER_STARTED_LABEL,
    PRODUCT_FILTER,
    owner_host,
    process_status,
)


def reap_orphans(client: docker.DockerClient) -> list[str]:
    """Remove sandcrew containers that nobody will remove; return their ids.

    A container is orphaned when its deadline label has passed (its run is
    surely over, whoever owns it) or when its owner process, on this host, is
    gone: a zombie owner counts as gone, and so does a pid that now belongs to a
    process started after the owner. Containers of live owners within their
    deadline are left alone.
    """
    moment = time.time()
    try:
        containers = client.api.containers(all=True, filters={"label": PRODUCT_FILTER})
    except docker.errors.APIError as exc:
        raise SandboxError(f"Docker could not list sandbox containers: {exc.explanation}") from None
    except docker.errors.DockerException as exc:
        raise DockerUnavailableError(client.api.base_url, root_cause(exc)) from None
    removed: list[str] = []
    for container in containers:
        labels: dict[str, str] = container.get("Labels") or {}
        if not _is_orphan(labels, moment):
            continue
        container_id = str(container["Id"])
        try:
            client.api.remove_container(container_id, force=True, v=True)
        except docker.errors.NotFound:
            continue  # removed meanwhile by its owner or another reaper
        except docker.errors.APIError as exc:
            if exc.status_code == 409:
                continue  # a removal is already under way
            raise SandboxError(
                f"Docker could not remove the orphaned container {container_id[:12]}: "
                f"{exc.explanation}"
            ) from None
        removed.append(container_id)
    return removed


def _is_orphan(labels: dict[str, str], now: float) -> bool:
    deadline = _number(labels.get(DEADLINE_LABEL))
    if deadline is None or deadline < now:
        # No readable deadline: an old or tampered label set; treat as orphaned.
        return True
    if labels.get(OWNER_HOST_LABEL) != owner_host():
        return False
    pid = _number(labels.get(OWNER_PID_LABEL))
    return pid is not None and not _owner_alive(int(pid), labels.get(OWNER_STARTED_LABEL))


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _owner_alive(pid: int, started: str | None) -> bool:
    """Whether the process that labelled a container as ``pid`` (started at ``started``, when
    the label says) still lives; a zombie (dead, not yet reaped) counts as dead."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by another user
    status = process_status(pid)
    if status is None:
        return True  # no /proc (or it just ended): kill() already said it exists
    state, start = status
    if state in ("Z", "X"):
        return False
    # Pids are reused (32768 of them on many machines): the same pid started at
    # another moment is another process.
    return started is None or started == start
