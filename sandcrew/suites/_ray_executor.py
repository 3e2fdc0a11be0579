"""Running jobs on a Ray cluster: chunks of jobs, one sandbox per chunk on its node's engine.

The jobs are grouped into chunks; each chunk is one Ray task, which makes one
sandbox from the executor's factory against the Docker engine of the node it
runs on (with batch isolation: one batch container for the whole chunk) and
streams each result back as it finishes. No container crosses machines. Nodes
need sandcrew and the sandbox image installed; the driver ships jobs, the
sandbox factory and settings, and receives plain results.

A chunk whose worker or node is lost mid-run is not retried by Ray: the driver
knows which of its jobs were reported and sends only the others again, as a
new chunk, so that no job is reported twice and none is lost; each such result
says it was re-run. A node that cannot run the sandbox (no Docker, no image)
ends the run with an error naming the node.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import queue
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sandcrew.errors import ConfigurationError, ErrorCode, InfrastructureError
from sandcrew.suites._errors import SuiteError
from sandcrew.suites._executors import (
    Isolation,
    Job,
    JobRun,
    SandboxFactory,
    check_concurrency,
    first_leaf,
    run_jobs,
    runs_at_once,
)
from sandcrew.suites._outcomes import TaskResult, TaskStatus

if TYPE_CHECKING:
    from sandcrew.sandbox import SandboxConfig

RAY_INSTALL = "pip install 'sandcrew[ray]'"
CONNECT_TIMEOUT = 5.0
"""Seconds a cluster address may take to accept a connection before the run gives up."""
CHUNKS_PER_SLOT = 4
"""Chunks per slot of the cluster by default: small enough to balance the nodes' load and
to lose little with a worker, large enough that a container start is paid rarely."""
MAX_CHUNK_SIZE = 500
"""Jobs per chunk at most by default."""
ATTEMPTS = 3
"""Times a job is sent to a worker before a lost worker counts as the job's error."""
CANCEL_GRACE = 60.0
"""Seconds a cancelled run waits for its workers to remove their containers."""
_SLOTS_PER_CHUNK = 1
"""Runs at once in one chunk's sandbox: a chunk holds one of the cluster's CPUs."""
_DEFAULT_PORTS = {"ray": 10001, "": 6379}
"""Ray Client's port for ``ray://`` addresses, the GCS port for ``host`` alone."""


@dataclass(frozen=True)
class _ChunkStarted:
    node: str


@dataclass(frozen=True)
class _NodeFailure:
    """What ended a chunk on its node; the driver raises it, naming the node."""

    node: str
    message: str
    code: ErrorCode | None
    """``None``: a configuration error, the same on every node."""

    def error(self) -> Exception:
        if self.code is None:
            return ConfigurationError(f"on Ray node {self.node}: {self.message}")
        return InfrastructureError(f"on Ray node {self.node}: {self.message}", code=self.code)


class RayExecutor:
    """Runs jobs in chunks over Ray, each chunk in one sandbox on its node's Docker engine.

    ``address`` names a running cluster (``"auto"``, ``"ray://host:10001"``,
    ``"host:6379"``); without one a local Ray instance is started for the run
    (``num_cpus`` slots, default: the cores) and shut down afterwards. A Ray
    already initialised in this process is used as it is. ``isolation`` (or
    ``sandbox_factory``) picks the sandbox of a chunk. ``chunk_size`` (jobs per
    chunk) and the run's ``concurrency`` (chunks at once) default to what the
    cluster's CPUs call for: one chunk per CPU, about four chunks per CPU in all.
    """

    def __init__(
        self,
        *,
        address: str | None = None,
        num_cpus: int | None = None,
        isolation: Isolation | str = Isolation.TASK,
        sandbox_factory: SandboxFactory | None = None,
        chunk_size: int | None = None,
    ) -> None:
        if num_cpus is not None and num_cpus < 1:
            raise SuiteError(f"num_cpus must be at least 1 (got {num_cpus})")
        if chunk_size is not None and chunk_size < 1:
            raise SuiteError(f"chunk size must be at least 1 (got {chunk_size})")
        self.address = address
        self.num_cpus = num_cpus
        self.isolation = Isolation(isolation)
        self.sandbox_factory = sandbox_factory or self.isolation.factory
        self.chunk_size = chunk_size
        self._answered = False  # the address accepted a connection once: not probed again

    @property
    def name(self) -> str:
        return self.isolation.executor_name("ray")

    async def execute(self, run: JobRun) -> None:
        concurrency = check_concurrency(run.concurrency)
        if not run.jobs:
            return
        ray = _import_ray()
        started_here = await asyncio.to_thread(self._connect, ray)
        try:
            at_once = concurrency or _cluster_cpus(ray)
            size = self.chunk_size or chunk_size_for(len(run.jobs), at_once)
            remote = ray.remote(run_chunk).options(
                num_cpus=_SLOTS_PER_CHUNK,
                max_retries=0,  # retried here: only the jobs that did not report
                num_returns="streaming",
                scheduling_strategy="SPREAD",
            )
            chunked = _ChunkedRun(ray, remote, run, self.sandbox_factory)
            await chunked.run(size, at_once)
        finally:
            if started_here:
                # Stopping a local Ray takes seconds: keep the event loop (and Ctrl-C) responsive.
                await asyncio.to_thread(ray.shutdown)

    def check_reachable(self) -> None:
        """Ray is installed, the cluster's address accepts connections and, for a head's
        address (``HOST:PORT``), its GCS lets this process in: all within
        :data:`CONNECT_TIMEOUT` seconds. A cluster that wants a token this process does not
        send is a :class:`ConfigurationError` naming the variables to set.

        Addresses that Ray resolves itself (``auto``, ``local``) and no address (a local Ray
        started for the run) are left to Ray.
        """
        _import_ray()
        endpoint = _tcp_endpoint(self.address) if self.address is not None else None
        if self.address is None or endpoint is None or self._answered:
            return
        deadline = time.monotonic() + CONNECT_TIMEOUT
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
        if "://" not in self.address:  # a head's GCS (Ray Client's port is not probed)
            _check_gcs(self.address, f"{endpoint[0]}:{endpoint[1]}", deadline)
        self._answered = True

    def _connect(self, ray: Any) -> bool:
        """Join the cluster (or start a local one); True when this call started Ray."""
        if ray.is_initialized():
            return False
        self.check_reachable()
        options: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "logging_level": "ERROR",
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


def chunk_size_for(jobs: int, chunks_at_once: int) -> int:
    """Jobs per chunk: about ``CHUNKS_PER_SLOT`` chunks per slot, at most ``MAX_CHUNK_SIZE``."""
    return max(1, min(MAX_CHUNK_SIZE, math.ceil(jobs / (chunks_at_once * CHUNKS_PER_SLOT))))


class _ChunkedRun:
    """The driver's side of one run: chunks in flight, what was reported, what to send again."""

    def __init__(self, ray: Any, remote: Any, run: JobRun, factory: SandboxFactory) -> None:
        self.ray = ray
        self.remote = remote
        self.jobs = run.jobs
        self.factory = factory
        self.config = run.sandbox_config
        self.on_result = run.on_result
        self.reported: set[int] = set()
        self.sent: dict[int, int] = {}
        self.notes: dict[int, list[str]] = {}
        self.lost_errors = _lost_worker_errors(ray)
        self.one_at_a_time = run.concurrency == 1
        """Nothing queued in a chunk's sandbox either (``concurrency=1``)."""
        self._group: asyncio.TaskGroup | None = None
        self._slots: asyncio.Semaphore | None = None

    async def run(self, size: int, at_once: int) -> None:
        self._slots = asyncio.Semaphore(at_once)
        indices = range(len(self.jobs))
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                for start in range(0, len(self.jobs), size):
                    group.create_task(self._drive(list(indices[start : start + size])))
        except ExceptionGroup as group_error:
            raise _unwrapped(self.ray, first_leaf(group_error)) from None

    async def _drive(self, chunk: list[int]) -> None:
        assert self._slots is not None
        async with self._slots:
            for index in chunk:
                self.sent[index] = self.sent.get(index, 0) + 1
            node = "(not started)"
            generator = self.remote.remote(
                [(index, self.jobs[index]) for index in chunk],
                self.factory,
                self.config,
                queued=not self.one_at_a_time,
            )
            try:
                async for reference in generator:
                    message = await reference
                    if isinstance(message, _ChunkStarted):
                        node = message.node
                    elif isinstance(message, _NodeFailure):
                        raise message.error()
                    else:
                        self._report(*message)
            except asyncio.CancelledError:
                # Interrupts the worker, whose sandbox then removes its container; waiting
                # for it keeps this driver (whose exit would kill the worker) alive meanwhile.
                # Ray may end a cancelled stream before the worker's cleanup (about one run
                # in ten): the worker then dies with this driver, and its container with it.
                self.ray.cancel(generator)
                await _drained(generator)
                raise
            except self.lost_errors as lost:
                self._send_again(chunk, f"its Ray worker on node {node} was lost ({_first(lost)})")

    def _report(self, index: int, result: TaskResult) -> None:
        if index in self.reported:
            return  # a result that arrived from a chunk sent again: the first one counts
        self.reported.add(index)
        notes = self.notes.get(index)
        if notes:
            result = result.model_copy(update={"retries": (*notes, *result.retries)})
        self.on_result(index, result)

    def _send_again(self, chunk: list[int], why: str) -> None:
        assert self._group is not None
        again: list[int] = []
        for index in chunk:
            if index in self.reported:
                continue
            self.notes.setdefault(index, []).append(f"{why}; sent again")
            if self.sent[index] < ATTEMPTS:
                again.append(index)
            else:
                job = self.jobs[index]
                self._report(
                    index,
                    TaskResult(
                        task_id=job.task.id,
                        kind=job.task.kind,
                        tags=job.task.tags,
                        status=TaskStatus.ERROR,
                        duration=0.0,
                        detail=f"lost with its Ray worker {ATTEMPTS} times; last time {why}",
                    ),
                )
        if again:
            self._group.create_task(self._drive(again))


def run_chunk(
    jobs: list[tuple[int, Job]],
    factory: SandboxFactory,
    config: SandboxConfig,
    *,
    queued: bool = True,
) -> Iterator[_ChunkStarted | _NodeFailure | tuple[int, TaskResult]]:
    """Body of a chunk's Ray task: one sandbox on this node's engine, each result as it ends.

    The jobs run on an event loop in a thread of their own; this generator hands
    their results to Ray as they come. When Ray cancels the task (the driver was
    interrupted), the loop is cancelled and the sandbox removes its containers
    before the task ends. ``queued``: keep as many runs in flight as the sandbox
    accepts (a batch queues the next one inside), else strictly one at a time.
    """
    node = _this_node()
    yield _ChunkStarted(node)
    messages: queue.SimpleQueue[_NodeFailure | tuple[int, TaskResult] | None] = queue.SimpleQueue()
    loop = asyncio.new_event_loop()
    main = loop.create_task(_run_chunk(jobs, factory, config, queued, messages.put))

    def serve() -> None:
        try:
            loop.run_until_complete(main)
        except (ConfigurationError, InfrastructureError) as error:
            code = None if isinstance(error, ConfigurationError) else error.code
            messages.put(_NodeFailure(node, str(error), code))
        except BaseException as error:  # a chunk that cannot run at all ends the run
            messages.put(
                _NodeFailure(node, f"{type(error).__name__}: {error}", ErrorCode.INFRASTRUCTURE)
            )
        finally:
            loop.close()
            messages.put(None)

    server = threading.Thread(target=serve, name="sandcrew-chunk", daemon=True)
    server.start()
    try:
        while True:
            try:
                # A timeout keeps this thread where Ray's cancellation can interrupt it.
                message = messages.get(timeout=0.5)
            except queue.Empty:
                continue
            if message is None:
                return
            yield message
            if isinstance(message, _NodeFailure):
                return
    finally:
        if server.is_alive():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(main.cancel)
            server.join(CANCEL_GRACE)


async def _run_chunk(
    jobs: list[tuple[int, Job]],
    factory: SandboxFactory,
    config: SandboxConfig,
    queued: bool,
    put: Any,
) -> None:
    sandbox = factory(config, slots=_SLOTS_PER_CHUNK)
    try:
        await sandbox.start()
        await run_jobs(
            sandbox,
            jobs,
            runs_at_once(sandbox, _SLOTS_PER_CHUNK) if queued else 1,
            lambda index, result: put((index, result)),
        )
    finally:
        await sandbox.aclose()


async def _drained(generator: Any) -> None:
    """Wait (a while) for a cancelled chunk's task to end."""
    with contextlib.suppress(Exception, TimeoutError):
        async with asyncio.timeout(CANCEL_GRACE):
            async for reference in generator:
                with contextlib.suppress(Exception):
                    await reference


def _this_node() -> str:
    ray = import_module("ray")
    node_id = ray.get_runtime_context().get_node_id()
    return f"{ray.util.get_node_ip_address()} ({socket.gethostname()}, node id {node_id[:12]})"


def _cluster_cpus(ray: Any) -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def _lost_worker_errors(ray: Any) -> tuple[type[BaseException], ...]:
    errors = ray.exceptions
    return (
        errors.WorkerCrashedError,
        errors.NodeDiedError,
        errors.ObjectLostError,
        errors.LocalRayletDiedError,
        errors.OutOfMemoryError,
        errors.RaySystemError,
    )


def _first(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def _unwrapped(ray: Any, error: BaseException) -> BaseException:
    # A task's own exception travels wrapped; show the original (e.g. a ConfigurationError).
    if isinstance(error, ray.exceptions.RayTaskError):
        cause = error.as_instanceof_cause()
        return cause if isinstance(cause, BaseException) else error
    return error


def _check_gcs(address: str, gcs: str, deadline: float) -> None:
    """The GCS at ``gcs`` lets this process in, as ``ray.init`` would ask it, by ``deadline``.

    Ray's own join retries a refused token for about 20 s and then says only that it could
    not connect; asked once here, the refusal is known in milliseconds. The question runs in
    a thread of its own: a port that is not a GCS keeps Ray's client waiting for 40 s, which
    the run does not wait for.
    """
    try:
        from ray._raylet import GcsClient  # type: ignore[attr-defined]
        from ray.exceptions import AuthenticationError
    except ImportError:  # another Ray than the one this was written for: left to ray.init
        return
    answers: queue.Queue[BaseException | None] = queue.Queue(maxsize=1)

    def ask() -> None:
        try:
            GcsClient(address=gcs)
        except BaseException as error:  # handed to the waiting thread, whatever it is
            answers.put(error)
        else:
            answers.put(None)

    threading.Thread(target=ask, name="sandcrew-ray-gcs-probe", daemon=True).start()
    try:
        refusal = answers.get(timeout=max(deadline - time.monotonic(), 0.1))
    except queue.Empty:
        raise InfrastructureError(
            f"the Ray cluster at {address} accepts connections but did not answer as a Ray "
            f"head within {CONNECT_TIMEOUT:g} s; fix --address (the head's GCS port, "
            "`ray start --head --port`, 6379 by default)",
            code=ErrorCode.CLUSTER_UNREACHABLE,
            retryable=True,
        ) from None
    if isinstance(refusal, AuthenticationError):
        raise ConfigurationError(_token_advice(address)) from None
    if refusal is not None:
        raise InfrastructureError(
            f"the Ray cluster at {address} could not be joined ({_first(refusal)}); "
            "start it with `ray start --head` or fix --address",
            code=ErrorCode.CLUSTER_UNREACHABLE,
            retryable=True,
        ) from None


def _token_advice(address: str) -> str:
    """Why the cluster refused this process (Ray's ``InvalidAuthToken``), and what to set."""
    token_source = "RAY_AUTH_TOKEN (or a file named by RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token)"
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
        return (
            f"the Ray cluster at {address} requires token authentication (Ray: "
            "InvalidAuthToken) and this process sends no token: set RAY_AUTH_MODE=token and "
            f"{token_source} to the cluster's token, which `ray get-auth-token` prints on the "
            "head; or start every node with RAY_AUTH_MODE=disabled (a private network only)"
        )
    return (
        f"the Ray cluster at {address} refused this process's token (Ray: InvalidAuthToken): "
        f"{token_source} must hold the cluster's token, which `ray get-auth-token` prints on "
        "the head"
    )


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
