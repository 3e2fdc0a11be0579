"""Settings of the sandbox: every hardening default is a named, validated field."""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar, Literal

from pydantic import (
    Field,
    field_validator,
)

from ..core._settings_model import SettingsModel
from ._deadlines import limit_problem
from ._egress_policy import EgressPolicy
from ._images import DEFAULT_IMAGES
from ._languages import normalize_language
from ._seccomp import ENGINE_DEFAULT, PROFILE_NAME

MIB = 1024 * 1024

_USER_PATTERN = re.compile(r"^(\d+)(?::(\d+))?$")

_SYSTEM_FOLDERS = frozenset(
    {
        "bin",
        "boot",
        "dev",
        "etc",
        "lib",
        "lib64",
        "proc",
        "root",
        "run",
        "sbin",
        "sys",
        "usr",
        "var",
    }
)

# Lower bounds below which the interpreter itself cannot start; they make
# mistakes such as a memory limit in MiB instead of bytes fail loudly.
_MINIMUMS: dict[str, int] = {
    "memory_bytes": 8 * MIB,
    "pids_limit": 6,
    "open_files_limit": 16,
    "workdir_tmpfs_bytes": MIB,
    "tmp_tmpfs_bytes": MIB,
    "shm_bytes": MIB,
    "log_max_bytes": 64 * 1024,
}


# Upper bounds: far above any sane sandbox run, and low enough that every deadline and
# watchdog derived from them stays finite and representable (a 1e10 s timeout overflowed
# the host's timer and silently dropped the deadline).
MAX_TIMEOUT_SECONDS = 24 * 3600.0
"""A run lasts one day at most; longer jobs are not throwaway sandbox runs."""
_MAXIMUMS: dict[str, float] = {
    "timeout": MAX_TIMEOUT_SECONDS,
    "memory_bytes": 1024**4,  # 1 TiB: more than any single engine host we target
    "cpus": 1024,
    "pool_idle_seconds": MAX_TIMEOUT_SECONDS,
    "reap_grace_seconds": MAX_TIMEOUT_SECONDS,
    "docker_timeout": MAX_TIMEOUT_SECONDS,
}


def _format_bytes(value: int) -> str:
    for unit, size in (("TiB", MIB * 1024 * 1024), ("GiB", MIB * 1024), ("MiB", MIB)):
        if value % size == 0:
            return f"{value // size} {unit}"
    return f"{value} bytes"


class SandboxConfig(SettingsModel):
    """How a sandboxed run is isolated and limited. Frozen; pass it to ``DockerSandbox``.

    Defaults are hardened; relaxations (``network=True``, more memory, another
    ``runtime`` such as ``"runsc"``) are explicit. Invalid values raise
    :class:`~sandcrew.core.ConfigurationError` listing every problem at once.
    """

    settings_title: ClassVar[str] = "sandbox settings"

    images: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_IMAGES))
    """Language → image tag."""
    timeout: float = 10.0
    """Wall-clock seconds a program may run before its container is killed."""
    memory_bytes: int = 256 * MIB
    """Memory limit; swap is off (the memory+swap limit equals it)."""
    cpus: float = 1.0
    """CPU quota in cores."""
    pids_limit: int = 64
    """Processes and threads the container may hold at once (stops fork bombs).

    Two of them are the sandbox's own: the init and the supervisor."""
    network: bool = False
    """Opt-in network access; off means an empty network namespace with only ``lo``."""
    egress: EgressPolicy | None = None
    """Network by policy (exclusive with ``network``): the hosts a run may reach and the
    secret headers added for it, through a proxy in this process; the container keeps no
    network interface. ``None``: no network at all."""
    read_only_root: bool = True
    """Mount the image's root filesystem read-only."""
    drop_all_capabilities: bool = True
    """Drop every Linux capability."""
    no_new_privileges: bool = True
    """Forbid gaining privileges through setuid binaries and file capabilities."""
    init: bool = True
    """Run a tiny init as PID 1: reaps zombies, and the container ends with the program."""
    workdir: str = "/workspace"
    """Working directory of the program; a tmpfs of ``workdir_tmpfs_bytes``."""
    workdir_tmpfs_bytes: int = 64 * MIB
    tmp_tmpfs_bytes: int = 64 * MIB
    """Size of the tmpfs on /tmp."""
    shm_bytes: int = 16 * MIB
    """Size of /dev/shm."""
    max_output_bytes: int = 1 * MIB
    """Bytes kept of stdout and of stderr, each; the rest is read and discarded."""
    max_code_bytes: int = 1 * MIB
    """Largest program accepted, in UTF-8 bytes."""
    max_input_files: int = 100
    """Input files one run may receive."""
    max_input_bytes: int = 32 * MIB
    """Total size of one run's input files; they must also fit the work dir's tmpfs."""
    max_artifacts: int = 32
    """Files of the output folder that come back from one run; 0 gives no output folder."""
    max_artifact_bytes: int = 32 * MIB
    """Total size of the files that come back from one run; the rest is flagged as truncated."""
    file_size_limit_bytes: int = 16 * MIB
    """``ulimit -f``: largest file the program may write."""
    open_files_limit: int = 256
    """``ulimit -n``: open file descriptors per process."""
    core_dump_limit_bytes: int = 0
    """``ulimit -c``: no core dumps by default."""
    user: str | None = None
    """A fixed numeric ``uid:gid`` for every program; root is refused.

    ``None`` (the default) gives each run a uid of its own from ``uid_range``
    (its gid is the same number), so that per-user kernel limits (inotify
    instances, process counts) of one run never touch another's."""
    uid_range: tuple[int, int] = (20000, 59999)
    """Inclusive range of the per-run uids; never 0. Uids are leased host-wide: no two
    live containers of sandcrew processes on one host share one (a batch container
    takes a block of up to 1,024, one per task)."""
    seccomp_profile: str = "sandcrew"
    """``"sandcrew"`` (our own allowlist, the default), ``"engine-default"`` (the
    engine's default profile) or the path of a profile file in the engine's JSON format."""
    runtime: str | None = None
    """OCI runtime, e.g. ``"runsc"`` (gVisor); ``None`` uses the engine's default."""
    log_driver: Literal["none", "json-file"] = "none"
    """Docker's own log storage. ``"none"`` stores nothing (output is streamed to us)."""
    log_max_bytes: int = 1 * MIB
    """Cap of Docker's log file when ``log_driver`` is ``"json-file"`` (one file)."""
    pool_size: int = 0
    """Pre-started, never-used containers kept ready per image; 0 starts each run's own.

    A pool hides most of the start-up latency; each pooled container still
    serves exactly one run and is removed afterwards. :meth:`DockerSandbox.close`
    removes the waiting ones.
    """
    pool_idle_seconds: float = 300.0
    """Seconds a pooled container may wait for a run before a fresh one replaces it."""
    reap_grace_seconds: float = 60.0
    """Seconds after a run's deadline after which its container is surely orphaned."""
    docker_timeout: float = 60.0
    """Seconds to wait for one Docker API answer."""

    @field_validator("timeout")
    @classmethod
    def _usable_run_limit(cls, value: float) -> float:
        problem = limit_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("cpus", "reap_grace_seconds", "docker_timeout", "pool_idle_seconds")
    @classmethod
    def _positive_number(cls, value: float, info: Any) -> float:
        name: str = info.field_name
        if not value > 0:
            raise ValueError(f"{name} must be > 0 (got {value:g})")
        maximum = _MAXIMUMS[name]
        if not value <= maximum:
            raise ValueError(f"{name} must be at most {maximum:g} seconds (got {value:g})")
        return value

    @field_validator(
        "memory_bytes",
        "pids_limit",
        "workdir_tmpfs_bytes",
        "tmp_tmpfs_bytes",
        "shm_bytes",
        "max_output_bytes",
        "max_code_bytes",
        "max_input_files",
        "max_input_bytes",
        "max_artifact_bytes",
        "file_size_limit_bytes",
        "open_files_limit",
        "log_max_bytes",
    )
    @classmethod
    def _positive_int(cls, value: int, info: Any) -> int:
        name: str = info.field_name
        if value <= 0:
            raise ValueError(f"{name} must be > 0 (got {value})")
        minimum = _MINIMUMS.get(name)
        if minimum is not None and value < minimum:
            shown = _format_bytes(minimum) if name.endswith("_bytes") else str(minimum)
            raise ValueError(f"{name} must be at least {shown} (got {value})")
        maximum = _MAXIMUMS.get(name)
        if maximum is not None and value > maximum:
            raise ValueError(
                f"{name} must be at most {_format_bytes(int(maximum))} (got {_format_bytes(value)})"
            )
        return value

    @field_validator("core_dump_limit_bytes", "pool_size", "max_artifacts")
    @classmethod
    def _not_negative(cls, value: int, info: Any) -> int:
        if value < 0:
            raise ValueError(f"{info.field_name} must be >= 0 (got {value})")
        return value

    @field_validator("user")
    @classmethod
    def _numeric_non_root_user(cls, value: str | None) -> str | None:
        if value is None:
            return None
        match = _USER_PATTERN.match(value)
        if match is None:
            raise ValueError(
                f"user must be a numeric 'uid:gid' such as '10001:10001' (got {value!r})"
            )
        if int(match.group(1)) == 0:
            raise ValueError(f"user must not be root (uid 0) (got {value!r})")
        if match.group(2) is not None and int(match.group(2)) == 0:
            raise ValueError(f"user must not be in the root group (gid 0) (got {value!r})")
        return value if match.group(2) is not None else f"{value}:{value}"

    @field_validator("uid_range")
    @classmethod
    def _unprivileged_uid_range(cls, value: tuple[int, int]) -> tuple[int, int]:
        low, high = value
        if not 1 <= low <= high < 2**31 - 1:
            raise ValueError(
                f"uid_range must be (low, high) with 1 <= low <= high < 2147483647 (got {value!r})"
            )
        return value

    @field_validator("seccomp_profile")
    @classmethod
    def _known_seccomp_profile(cls, value: str) -> str:
        if value in (PROFILE_NAME, ENGINE_DEFAULT):
            return value
        try:
            with open(value, encoding="utf-8") as handle:
                loaded = json.load(handle)
        except (OSError, ValueError) as exc:
            raise ValueError(
                f"seccomp_profile must be {PROFILE_NAME!r}, {ENGINE_DEFAULT!r} or a readable "
                f"JSON profile file ({exc})"
            ) from None
        if not isinstance(loaded, dict) or "defaultAction" not in loaded:
            raise ValueError(f"seccomp_profile {value!r} is not a seccomp profile")
        return value

    @field_validator("workdir")
    @classmethod
    def _absolute_workdir(cls, value: str) -> str:
        cleaned = value.rstrip("/")
        parts = cleaned.split("/")
        # A tmpfs mounted over a system folder would hide or replace what the image needs.
        system = parts[1] if len(parts) > 1 else ""
        if (
            not value.startswith("/")
            or cleaned in ("", "/tmp")
            or ".." in parts
            or system in _SYSTEM_FOLDERS
        ):
            raise ValueError(
                "workdir must be an absolute path outside the system folders "
                f"(/, /tmp, /{', /'.join(sorted(_SYSTEM_FOLDERS))}) without '..' (got {value!r})"
            )
        return cleaned

    @field_validator("images")
    @classmethod
    def _normalized_images(cls, value: dict[str, str]) -> dict[str, str]:
        images: dict[str, str] = {}
        for language, image in value.items():
            name = normalize_language(language)
            if name is None or not image.strip():
                raise ValueError(
                    f"images needs a language and an image tag (got {language!r}: {image!r})"
                )
            images[name] = image
        return images

    @field_validator("egress")
    @classmethod
    def _one_kind_of_network(cls, value: EgressPolicy | None, info: Any) -> EgressPolicy | None:
        if value is not None and info.data.get("network"):
            raise ValueError(
                "network (all of it) and egress (an allow-list) exclude each other; give one"
            )
        return value

    @property
    def fixed_ids(self) -> tuple[int, int] | None:
        """The ``(uid, gid)`` of ``user``, or ``None`` when each run gets its own."""
        if self.user is None:
            return None
        uid, gid = self.user.split(":", 1)
        return int(uid), int(gid)
