"""Running tasks on a Ray cluster: each task a Ray task, each node its own Docker engine.

Every worker builds its own :class:`~sandcrew.suites._runner.LocalExecutor`-style
sandbox against the Docker engine of the node it runs on, so the machines of a
cluster share the work and no container crosses machines. Nodes need sandcrew
and the sandbox image installed; the driver ships tasks, the solver and the
sandbox settings, and receives plain results.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Sequence
from importlib import import_module
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sandcrew.errors import ErrorCode, InfrastructureError

from ._errors import SuiteError
from ._outcomes import TaskResult
from ._runner import ResultCallback, evaluate_task
from ._solvers import Solver
from ._tasks import AnswerTask, CodeTask

if TYPE_CHECKING:
    from sandcrew.sandbox import SandboxConfig

RAY_INSTALL = "pip install 'sandcrew[ray]'"
CONNECT_TIMEOUT = 5.0
"""Seconds a cluster address may take to accept a connection before the run gives up."""
_DEFAULT_PORTS = {"ray": 10001, "": 6379}
"""Ray Client's port for ``ray://`` addresses, the GCS port for ``host`` alone."""


class RayExecutor:
    """Fans tasks out over Ray.

    ``address`` names a running cluster (``"auto"``, ``"ray://host:10001"``,
    ``"host:6379"``); without one a local Ray instance is started for the run
    (``num_cpus`` slots, default: the cores) and shut down afterwards. A Ray
    already initialised in this process is used as it is.
    """

    name = "ray"

    def __init__(self, *, address: str | None = None, num_cpus: int | None = None) -> None:
        if num_cpus is not None and num_cpus < 1:
            raise SuiteError(f"num_cpus must be at least 1 (got {num_cpus})")
        self.address = address
        self.num_cpus = num_cpus
        self._answered = False  # the address accepted a connection once: not probed again

    async def execute(
        self,
        tasks: Sequence[AnswerTask | CodeTask],
        solver: Solver,
        *,
        concurrency: int,
        sandbox_config: SandboxConfig,
        on_result: ResultCallback,
    ) -> None:
        ray = _import_ray()
        started_here = await asyncio.to_thread(self._connect, ray)
        try:
            remote_evaluate = ray.remote(num_cpus=1, max_retries=0)(evaluate_on_worker)
            slots = asyncio.Semaphore(concurrency)

            async def one(task: AnswerTask | CodeTask) -> None:
                async with slots:
                    reference = remote_evaluate.remote(task, solver, sandbox_config)
                    try:
                        result: TaskResult = await reference
                    except asyncio.CancelledError:
                        # Interrupts the worker, whose sandbox then removes the container.
                        ray.cancel(reference)
                        raise
                on_result(result)

            try:
                async with asyncio.TaskGroup() as group:
                    for task in tasks:
                        group.create_task(one(task))
            except ExceptionGroup as group_error:
                raise _unwrapped(ray, group_error) from None
        finally:
            if started_here:
                # Stopping a local Ray takes seconds: keep the event loop (and Ctrl-C) responsive.
                await asyncio.to_thread(ray.shutdown)

    def check_reachable(self) -> None:
        """Ray is installed and the cluster's address accepts connections (within seconds).

        Addresses that Ray resolves itself (``auto``, ``local``) and no address (a local Ray
        started for the run) are left to Ray.
        """
        _import_ray()
        endpoint = _tcp_endpoint(self.address) if self.address is not None else None
        if endpoint is None or self._answered:
            return
        try:
            socket.create_connection(endpoint, timeout=CONNECT_TIMEOUT).close()
        except OSError as error:
            reason = "timed out" if isinstance(error, TimeoutError) else error.strerror or error
            raise InfrastructureError(
                f"the Ray cluster at {self.address} does not answer ({reason}); "
                "start it with `ray start --head` or fix --address",
                code=ErrorCode.CLUSTER_UNREACHABLE,
                retryable=True,
            ) from None
        self._answered = True

    def _connect(self, ray: Any) -> bool:
        """Join the cluster (or start a local one); True when this call started Ray."""
        if ray.is_initialized():
            return False
        self.check_reachable()
        options: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "logging_level": "WARNING",
        }
        if self.address is None:
            options["num_cpus"] = self.num_cpus or os.cpu_count() or 1
        else:
            options["address"] = self.address
        try:
            ray.init(**options)
        except ConnectionError as error:
            raise InfrastructureError(
                f"the Ray cluster at {self.address} could not be joined ({error}); "
                "start it with `ray start --head` or fix --address",
                code=ErrorCode.CLUSTER_UNREACHABLE,
                retryable=True,
            ) from None
        return True


def evaluate_on_worker(
    task: AnswerTask | CodeTask, solver: Solver, sandbox_config: SandboxConfig
) -> TaskResult:
    """Body of the Ray task: a sandbox on this node's engine, one task, one result."""
    from sandcrew.sandbox import DockerSandbox

    async def run() -> TaskResult:
        async with DockerSandbox(sandbox_config) as sandbox:
            return await evaluate_task(task, solver, sandbox)

    return asyncio.run(run())


def _unwrapped(ray: Any, group: BaseExceptionGroup[BaseException]) -> BaseException:
    from ._runner import first_leaf

    error = first_leaf(group)
    # A task's own exception travels wrapped; show the original (e.g. a ConfigurationError).
    if isinstance(error, ray.exceptions.RayTaskError):
        cause = error.as_instanceof_cause()
        return cause if isinstance(cause, BaseException) else error
    return error


def _tcp_endpoint(address: str) -> tuple[str, int] | None:
    """Host and port of ``host[:port]`` or ``ray://host[:port]``; None for ``auto``, ``local``."""
    if address in ("auto", "local"):
        return None
    parts = urlsplit(address if "://" in address else f"//{address}")
    try:
        port = parts.port
    except ValueError:
        raise SuiteError(f"--address {address}: the port is not a number from 0 to 65535") from None
    if not parts.hostname:
        raise SuiteError(f"--address {address}: expected HOST:PORT or ray://HOST:PORT")
    return parts.hostname, port or _DEFAULT_PORTS.get(parts.scheme, 6379)


def _import_ray() -> Any:
    try:
        return import_module("ray")
    except ModuleNotFoundError:
        raise SuiteError(f"--executor ray needs Ray: {RAY_INSTALL}") from None
