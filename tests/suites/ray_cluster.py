"""A real two-node Ray cluster on this machine, started and stopped by the tests themselves.

Each node is a `ray start --block` process in a session of its own, with its own ports,
temp dir and resources (one CPU each, a small object store); stopping the cluster ends
those two sessions only (never `ray stop`, which ends every Ray process on the
machine). Token authentication is off: a private cluster on loopback.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors
import pytest

from sandcrew.sandbox._labels import (
    OWNER_PID_LABEL,
    OWNER_STARTED_LABEL,
    PRODUCT_FILTER,
    process_status,
)

RAY = str(Path(sys.executable).with_name("ray"))
START_SECONDS = 90.0
OBJECT_STORE_BYTES = 100 * 1024 * 1024
CLUSTER_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
CLUSTER_TEST_MARKS = [
    pytest.mark.docker,
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.usefixtures("cluster_environment"),
]
"""The marks of a module of tests on these clusters (a longer proof; drivers need CLUSTER_ENV)."""

Owner = tuple[int, str]
"""A process as a container's labels name its owner: pid and start time. A pid alone could
be a dead process's, whose container an earlier test left (pids are reused)."""


def owners(pids: set[int]) -> set[Owner]:
    """The live processes among ``pids``, as owners."""
    found = set()
    for pid in pids:
        status = process_status(pid)
        if status is not None:
            found.add((pid, status[1]))
    return found


@dataclass
class RayNode:
    process: subprocess.Popen[bytes]
    temp_dir: Path
    log: Path

    @property
    def session(self) -> int:
        """The node's session: its processes, workers included (each in a group of its own)."""
        return self.process.pid  # started in a session of its own: its pid is the session's


@dataclass
class RayCluster:
    address: str
    nodes: list[RayNode] = field(default_factory=list)

    def pids(self) -> set[int]:
        """Every live process of the cluster's nodes (raylets, GCS, workers)."""
        sessions = {node.session for node in self.nodes}
        found: set[int] = set()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if os.getsid(int(entry.name)) in sessions:
                        found.add(int(entry.name))
        return found

    def workers_running(self, function: str) -> list[int]:
        """Pids of the cluster's workers executing ``function`` now (Ray names them so)."""
        running = []
        for pid in self.pids():
            with contextlib.suppress(OSError):
                title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
                if title.decode(errors="replace").startswith(f"ray::{function}"):
                    running.append(pid)
        return running

    def owners(self) -> set[Owner]:
        """Every live process of the cluster's nodes, as owners of containers."""
        return owners(self.pids())

    def owners_of(self, node: RayNode) -> set[Owner]:
        """Every live process of ``node``, as owners of containers."""
        found = set()
        for pid in self.pids():
            with contextlib.suppress(OSError):
                if os.getsid(pid) == node.session:
                    found.add(pid)
        return owners(found)

    def kill_node(self, node: RayNode) -> set[Owner]:
        """SIGKILL every process of ``node`` at once (as a machine that goes away); them."""
        killed = self.owners_of(node)
        for pid, _ in killed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return killed

    def stop(self) -> None:
        """End the nodes' processes: `ray start --block` stops its own, the rest are killed."""
        for node in reversed(self.nodes):
            with contextlib.suppress(ProcessLookupError):
                node.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for node in self.nodes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        for pid in self.pids():  # whatever the nodes left behind, in their sessions only
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for node in self.nodes:
            node.process.wait()
            shutil.rmtree(node.temp_dir, ignore_errors=True)


def containers_of(client: docker.DockerClient, owned_by: set[Owner]) -> list[str]:
    """Sandcrew containers (running or not) whose owner process is one of ``owned_by``."""
    found = client.api.containers(all=True, filters={"label": PRODUCT_FILTER})
    ids = []
    for container in found:
        labels = container.get("Labels") or {}
        pid = labels.get(OWNER_PID_LABEL, "")
        if pid.isdigit() and (int(pid), labels.get(OWNER_STARTED_LABEL, "")) in owned_by:
            ids.append(str(container["Id"]))
    return ids


def left_after_settling(client: docker.DockerClient, owned_by: set[Owner]) -> list[str]:
    """The owners' containers still there once the engine has had 10 s.

    A driver that ends a run early cancels its chunks and waits for their workers, but
    Ray may end a cancelled chunk's stream before its worker has removed its container
    (seen about once in ten runs). The driver's exit then has Ray kill the worker, and
    its container ends with it (a batch container when its connection closes, a run's
    container when its owner is gone), a moment after the driver exits.
    """
    left = containers_of(client, owned_by)
    settle = time.monotonic() + 10
    while left and time.monotonic() < settle:
        time.sleep(0.2)
        left = containers_of(client, owned_by)
    return left


def described(client: docker.DockerClient, container_ids: list[str]) -> str:
    """What the engine says of each container (state, labels): for an assertion's message."""
    lines = []
    for container_id in container_ids:
        try:
            seen = client.api.inspect_container(container_id)
        except docker.errors.NotFound:
            lines.append(f"{container_id[:12]}: gone since")
            continue
        state = seen["State"]
        lines.append(
            f"{container_id[:12]}: {state['Status']} (created {seen['Created']}, "
            f"finished {state.get('FinishedAt')}), labels {seen['Config']['Labels']}"
        )
    return "\n".join(lines)


def _free_port() -> int:
    return _free_ports(1)[0]


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free ports: every probe stays bound until all are chosen, since
    the kernel may hand a port just released to the next probe (Ray refuses a node whose
    two components were given one port)."""
    with contextlib.ExitStack() as held:
        ports: list[int] = []
        for _ in range(count):
            probe = held.enter_context(socket.socket())
            probe.bind(("127.0.0.1", 0))
            ports.append(int(probe.getsockname()[1]))
        return ports


def _worker_ports(count: int = 24) -> tuple[int, int]:
    """A run of free ports for one node's workers."""
    for _ in range(50):
        first = _free_port()
        if first + count > 65000:
            continue
        try:
            for port in range(first, first + count):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        return first, first + count - 1
    raise RuntimeError("no run of free ports for Ray workers")


def _start_node(
    options: list[str], name: str, environment: dict[str, str] | None = None
) -> RayNode:
    temp_dir = Path(tempfile.mkdtemp(prefix=f"rc{name}", dir="/tmp"))
    log = temp_dir / "start.log"
    low, high = _worker_ports()
    given = {int(option) for option in options if option.isdigit()}  # the head's own port
    node_manager, object_manager, agent_http, agent_grpc, metrics, runtime_env = [
        port for port in _free_ports(12) if not low <= port <= high and port not in given
    ][:6]
    command = [
        RAY, "start", "--block", "--disable-usage-stats",
        "--node-ip-address", "127.0.0.1",
        "--num-cpus", "1",
        "--object-store-memory", str(OBJECT_STORE_BYTES),
        "--resources", f'{{"node_{name}": 1}}',
        "--temp-dir", str(temp_dir),
        "--node-manager-port", str(node_manager),
        "--object-manager-port", str(object_manager),
        "--min-worker-port", str(low),
        "--max-worker-port", str(high),
        "--dashboard-agent-listen-port", str(agent_http),
        "--dashboard-agent-grpc-port", str(agent_grpc),
        "--metrics-export-port", str(metrics),
        "--runtime-env-agent-port", str(runtime_env),
        *options,
    ]  # fmt: skip
    with log.open("wb") as output:
        process = subprocess.Popen(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**os.environ, **CLUSTER_ENV, **(environment or {})},
            start_new_session=True,
        )
    return RayNode(process, temp_dir, log)


def _wait_for_nodes(
    cluster: RayCluster, count: int, environment: dict[str, str] | None = None
) -> None:
    """Until ``count`` nodes are alive in the cluster (asked from a separate driver that
    runs with ``environment`` besides CLUSTER_ENV)."""
    probe = (
        "import ray, sys\n"
        f"ray.init(address={cluster.address!r}, logging_level='ERROR')\n"
        "print(sum(1 for n in ray.nodes() if n['Alive']))\n"
    )
    deadline = time.monotonic() + START_SECONDS
    alive = 0
    while time.monotonic() < deadline:
        for node in cluster.nodes:
            if node.process.poll() is not None:
                raise RuntimeError(f"a Ray node ended: {node.log.read_text(errors='replace')}")
        try:
            answer = subprocess.run(
                [sys.executable, "-c", probe],
                capture_output=True,
                text=True,
                env={**os.environ, **CLUSTER_ENV, **(environment or {})},
                timeout=max(5.0, min(30.0, deadline - time.monotonic())),
                check=False,
            )
        except subprocess.TimeoutExpired:  # a head still starting can hold a driver up: again
            continue
        if answer.returncode == 0 and answer.stdout.strip().isdigit():
            alive = int(answer.stdout.strip())
            if alive >= count:
                return
        time.sleep(1)
    raise RuntimeError(f"only {alive} of {count} Ray nodes came up in {START_SECONDS:g}s")


@contextlib.contextmanager
def two_node_cluster(second_node_env: dict[str, str] | None = None) -> Iterator[RayCluster]:
    """A head node and a second node joined to it, one CPU each; stopped at exit.

    ``second_node_env``: variables the second node's processes (its workers) run with.
    """
    port = _free_port()
    cluster = RayCluster(address=f"127.0.0.1:{port}")
    try:
        cluster.nodes.append(
            _start_node(
                [
                    "--head",
                    "--port", str(port),
                    "--include-dashboard", "false",
                ],
                "a",
            )
        )  # fmt: skip
        _wait_for_nodes(cluster, 1)
        cluster.nodes.append(_start_node(["--address", cluster.address], "b", second_node_env))
        _wait_for_nodes(cluster, 2)
        yield cluster
    finally:
        cluster.stop()


@contextlib.contextmanager
def head_alone(environment: dict[str, str]) -> Iterator[RayCluster]:
    """A head node alone (one CPU) whose processes run with ``environment`` (a driver that
    waits for it too); stopped at exit."""
    port = _free_port()
    cluster = RayCluster(address=f"127.0.0.1:{port}")
    try:
        cluster.nodes.append(
            _start_node(
                ["--head", "--port", str(port), "--include-dashboard", "false"], "a", environment
            )
        )
        _wait_for_nodes(cluster, 1, environment)
        yield cluster
    finally:
        cluster.stop()
