"""A hardened sandbox container: its settings, its launch, its removal.

A container is created with every hardening setting, attached (before it
starts, so no output can be missed) and started; its command is the supervisor
of :mod:`._supervisor`, which waits on stdin for a program and runs it as the
container's own uid. Nothing is
bind-mounted from the host and no archive is copied: the program travels on the
attach connection that also brings the output back. A launched container is
either run at once or kept by a pool until a run takes it; either way it serves
exactly one program and is force-removed afterwards.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import docker
import docker.errors
import requests
from docker.types import LogConfig, Ulimit

from ._config import SandboxConfig
from ._errors import ImageNotFoundError, SandboxError
from ._labels import DEADLINE_LABEL, RUN_ID_LABEL, container_labels
from ._seccomp import seccomp_security_option
from ._streams import close_connection
from ._supervisor import SUPERVISOR_CAPABILITIES, supervisor_command
from ._uids import release_run_uid

_T = TypeVar("_T")

_ATTACH_PARAMS = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}


# Engine answers that mean "a removal or a stop of this container is under
# way": the container is going anyway; asking again settles it.
_REMOVAL_RACES = ("is not running", "removal of container", "already in progress", "is dead")
REMOVAL_WAIT_SECONDS = 30.0
"""How long a removal the engine says is under way may take before it counts as failed."""


def security_options(config: SandboxConfig) -> list[str] | None:
    options = ["no-new-privileges:true"] if config.no_new_privileges else []
    seccomp = seccomp_security_option(config.seccomp_profile)
    if seccomp is not None:
        options.append(seccomp)
    return options or None


@dataclass(frozen=True)
class EgressMount:
    """A network-by-policy run's folder of the host proxy, and what its programs are told."""

    folder: str
    """The host folder holding the proxy's socket (and the trust bundle), mounted read-only."""
    container_folder: str
    container_socket: str
    environment: dict[str, str]


def host_config(
    api: docker.APIClient,
    config: SandboxConfig,
    *,
    uid: int,
    gid: int,
    egress: EgressMount | None = None,
) -> dict[str, Any]:
    """The hardened HostConfig of a sandbox container whose program runs as ``uid:gid``."""
    # noexec as Docker's own default for tmpfs: programs cannot drop and run binaries.
    tmpfs_options = "rw,nosuid,nodev,noexec"
    options: dict[str, Any] = {
        "read_only": config.read_only_root,
        "tmpfs": {
            config.workdir: (
                f"{tmpfs_options},size={config.workdir_tmpfs_bytes},uid={uid},gid={gid},mode=0700"
            ),
            "/tmp": f"{tmpfs_options},size={config.tmp_tmpfs_bytes},mode=1777",
        },
        "shm_size": config.shm_bytes,
        # An IPC namespace of its own that no other container may join.
        "ipc_mode": "private",
        "security_opt": security_options(config),
        # The supervisor's only privileges; the program drops them all.
        "cap_drop": ["ALL"] if config.drop_all_capabilities else None,
        "cap_add": list(SUPERVISOR_CAPABILITIES) if config.drop_all_capabilities else None,
        "pids_limit": config.pids_limit,
        "mem_limit": config.memory_bytes,
        # Equal to the memory limit: no swap on top of it.
        "memswap_limit": config.memory_bytes,
        "nano_cpus": round(config.cpus * 1e9),
        "ulimits": [
            Ulimit(
                name="fsize", soft=config.file_size_limit_bytes, hard=config.file_size_limit_bytes
            ),
            Ulimit(name="nofile", soft=config.open_files_limit, hard=config.open_files_limit),
            Ulimit(
                name="core", soft=config.core_dump_limit_bytes, hard=config.core_dump_limit_bytes
            ),
        ],
        "init": config.init,
        "log_config": _log_config(config),
        "runtime": config.runtime,
    }
    if egress is not None:
        # The only thing of the host a container ever sees: its run's proxy socket, read-only.
        options["binds"] = [f"{egress.folder}:{egress.container_folder}:ro"]
    return api.create_host_config(**options)


def _log_config(config: SandboxConfig) -> LogConfig:
    if config.log_driver == "none":
        return LogConfig(type="none")
    return LogConfig(
        type="json-file", config={"max-size": str(config.log_max_bytes), "max-file": "1"}
    )


def create_options(
    api: docker.APIClient,
    config: SandboxConfig,
    *,
    image: str,
    run_id: str,
    deadline: float,
    ids: tuple[int, int],
    pooled: bool = False,
    egress: EgressMount | None = None,
) -> dict[str, Any]:
    """Arguments of ``APIClient.create_container`` for one container.

    ``deadline`` (unix seconds) goes into the label the reaper reads: past it,
    the container is surely orphaned, whoever owns it. ``ids`` are the uid and
    gid the program runs as; the supervisor starts as root to drop to them.
    """
    uid, gid = ids
    proxy_socket = None if egress is None else egress.container_socket
    return {
        "image": image,
        "command": supervisor_command(config.workdir, uid, gid, proxy_socket=proxy_socket),
        "name": f"sandcrew-{run_id}",
        "hostname": "sandbox",
        "user": "0:0",
        "working_dir": config.workdir,
        # Nothing of the host's environment is ever passed on; language-specific
        # variables are set by the supervisor.
        "environment": {
            "HOME": config.workdir,
            **(egress.environment if egress is not None else {}),
        },
        "labels": container_labels(
            run_id=run_id, created_at=time.time(), deadline=deadline, pooled=pooled
        ),
        # With detach=False (the default) the SDK also sets StdinOnce: the
        # container's stdin closes when our attach connection does, so a
        # waiting container ends with the process that holds it.
        "stdin_open": True,
        # Never copy proxy settings from the docker CLI config into the container.
        "use_config_proxy": False,
        # An empty network namespace with only `lo`, and no time spent on
        # network setup (faster than network_mode="none" on Docker 20.10).
        "network_disabled": not config.network,
        "host_config": host_config(api, config, uid=uid, gid=gid, egress=egress),
    }


@dataclass(frozen=True)
class LaunchedContainer:
    """A started container waiting for its program on the attach connection."""

    name: str
    container_id: str
    run_id: str
    image: str
    connection: Any
    """What ``APIClient.attach_socket`` returned; whoever runs the program closes it."""
    deadline: float
    """Unix seconds after which the reaper may remove the container."""
    pooled: bool
    launched_at: float
    """``time.monotonic()`` when the container had started."""
    uid: int
    """The uid its program runs as."""


class Launch:
    """Create, attach and start one container; then or after a failure, remove what was made.

    :meth:`run` blocks (meant for a thread). :meth:`discard` may be called from
    another thread at any time, even while :meth:`run` is still going: it waits
    for the launch to settle, so a container created just after a cancellation
    is removed as well.
    """

    def __init__(
        self, api: docker.APIClient, options: dict[str, Any], *, pooled: bool, uid: int
    ) -> None:
        self._api = api
        self._options = options
        self._pooled = pooled
        self.uid = uid
        self._settled = threading.Event()
        self._container: LaunchedContainer | None = None

    @property
    def name(self) -> str:
        return str(self._options["name"])

    def run(self) -> LaunchedContainer:
        try:
            self._container = self._launch()
            return self._container
        finally:
            self._settled.set()

    def _launch(self) -> LaunchedContainer:
        api, image = self._api, str(self._options["image"])
        container_id = translated(
            lambda: str(api.create_container(**self._options)["Id"]), image=image
        )()
        attached = translated(
            lambda: api.attach_socket(container_id, params=_ATTACH_PARAMS), image=image
        )()
        try:
            translated(lambda: api.start(container_id), image=image)()
        except BaseException:
            close_connection(attached)
            raise
        labels: dict[str, str] = self._options["labels"]
        return LaunchedContainer(
            name=self.name,
            container_id=container_id,
            run_id=labels[RUN_ID_LABEL],
            image=image,
            connection=attached,
            deadline=float(labels[DEADLINE_LABEL]),
            pooled=self._pooled,
            launched_at=time.monotonic(),
            uid=self.uid,
        )

    def discard(self) -> None:
        self._settled.wait()
        if self._container is not None:
            discard_container(self._api, self._container)
        else:
            try:
                remove_container(self._api, self.name)
            finally:
                release_run_uid(self.uid)


def discard_container(api: docker.APIClient, container: LaunchedContainer) -> None:
    """Close the container's attach connection and force-remove it; free its uid.

    Whoever reads the connection must have stopped reading (see
    :func:`~._execution.execute`): closing a socket under a reader lets its
    descriptor number be reused while the reader still waits on it.
    """
    close_connection(container.connection)
    try:
        remove_container(api, container.name)
    finally:
        release_run_uid(container.uid)


def remove_container(api: docker.APIClient, name: str) -> None:
    """Force-remove a container and its anonymous volumes; return once it is gone.

    A missing container is fine. The engine may answer that a stop or removal is
    already under way ("is not running", "removal already in progress", 409), as
    when it removes an auto-removed container itself: then this waits for that
    removal, asking again now and then, for up to :data:`REMOVAL_WAIT_SECONDS`; a
    busy engine can take seconds. A container still there after that, and other
    refusals, raise :class:`SandboxError`.
    """
    deadline = time.monotonic() + REMOVAL_WAIT_SECONDS
    pause = 0.05
    while True:
        try:
            api.remove_container(name, force=True, v=True)
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            if not is_removal_race(exc):
                raise SandboxError(
                    f"Docker could not remove the sandbox container {name}: {explain(exc)}; "
                    "`sandcrew sandbox gc` will retry"
                ) from None
        else:
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise SandboxError(
                f"Docker was still removing the sandbox container {name} after "
                f"{REMOVAL_WAIT_SECONDS:g} s; `sandcrew sandbox gc` will retry",
                retryable=True,
            )
        if _removed_within(api, name, min(pause, left)):
            return
        pause = min(2 * pause, 1.0)


def _removed_within(api: docker.APIClient, name: str, seconds: float) -> bool:
    """Whether the engine reports the container removed within ``seconds``."""
    try:
        # The stub says whole seconds; requests takes any number of them.
        api.wait(name, timeout=seconds, condition="removed")  # type: ignore[arg-type]
    except docker.errors.NotFound:
        return True
    except requests.exceptions.RequestException:
        return False  # not yet: the wait timed out
    except docker.errors.APIError:
        time.sleep(seconds)  # the engine would not say: ask again after the pause
        return False
    return True


def is_removal_race(exc: docker.errors.APIError) -> bool:
    """The engine refused because another stop or removal of the container is under way."""
    text = explain(exc).lower()
    return exc.status_code == 409 or any(phrase in text for phrase in _REMOVAL_RACES)


def translated(call: Callable[[], _T], *, image: str) -> Callable[[], _T]:
    """Wrap a Docker call so that engine errors become sandbox errors with a fix."""

    def wrapper() -> _T:
        try:
            return call()
        except docker.errors.ImageNotFound:
            raise ImageNotFoundError(image) from None
        except docker.errors.NotFound:
            raise vanished() from None
        except docker.errors.APIError as exc:
            raise SandboxError(f"Docker refused the sandbox container: {explain(exc)}") from None
        except docker.errors.DockerException as exc:
            raise SandboxError(f"Docker failed: {exc}", retryable=True) from None

    return wrapper


def vanished() -> SandboxError:
    return SandboxError(
        "The sandbox container was removed while its program ran "
        "(by `sandcrew sandbox gc` or another process); run the code again",
        retryable=True,
    )


def explain(exc: docker.errors.APIError) -> str:
    return str(exc.explanation or exc)
