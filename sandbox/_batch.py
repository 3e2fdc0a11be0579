"""BatchSandbox: many programs in one throwaway, hardened container, each isolated from the rest.

The container is created with the same hardening as a :class:`~._sandbox.DockerSandbox`
container (read-only root, no network, no capabilities but the supervisor's,
seccomp, no-new-privileges), sized for ``slots`` programs at once (memory,
pids, CPUs and workdir size times ``slots``), and runs the batch supervisor
of :mod:`._inside.batch`, which gives every program its own uid, directory
and limits and frames each result on a channel the program cannot write.

When the container or its supervisor fails (or does not answer within a
program's limit plus the watchdog grace), every run in flight on it raises
:class:`BatchContainerLost` and the container is removed; the next run gets
a new container. Which of the runs in flight broke it cannot be known, so each
of them runs again alone. A run the supervisor reports as met by a fault of the
container (it could not start, or the kernel killed it for the shared memory)
runs again alone too; one it did not start because the container retired (a
task's leftovers could not be removed) goes to the next batch container.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import struct
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import docker

from ..core import UserError
from ._config import SandboxConfig
from ._container import Launch, LaunchedContainer, create_options, discard_container
from ._deadlines import WATCHDOG_GRACE, run_limit
from ._docker_client import connect_docker
from ._errors import SandboxError
from ._inside.batch import CLEANUP_SECONDS
from ._inside.framing import OUTCOME_ALONE, OUTCOME_ELSEWHERE, BatchHead, parse_batch_head
from ._inside_command import inside_command
from ._languages import SUPPORTED_LANGUAGES, normalize_language
from ._live import OutputCallback, tell_at_end
from ._reaper import reap_orphans
from ._result import TIMEOUT_EXIT_CODE, ExecutionResult
from ._sandbox import DockerSandbox
from ._streams import raw_connection, shutdown_connection
from ._threads import ClosedInThread, finish_in_thread, undone_if_cancelled
from ._uids import released_on_error, take_uid_block, uids_per_block

BATCH_LIFETIME_SECONDS = 3600.0
"""A batch container serves runs for at most this long (its reaper label allows twice that)."""

UIDS_PER_CONTAINER = 1024
"""Programs one batch container runs at most (each gets a uid of the container's leased block)."""

QUEUED_PER_SLOT = 2
"""Programs handed to the container per slot: one running, one waiting for the slot."""

_ANSWER_SLACK = 10.0  # seconds past limit + watchdog grace before the container is given up
_BATCH_ATTEMPTS = 2  # containers a run is sent to before it runs alone


class BatchContainerLost(SandboxError):
    """The batch container failed while this program ran; the program should run again alone."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"The batch container was lost: {detail}", retryable=True)


class _RunAlone(Exception):
    """The supervisor says a fault of the container met this run: it runs again alone."""


class _RunElsewhere(Exception):
    """The container retired before it started this run: it goes to another container."""


def batch_supervisor_command(
    workdir: str,
    first_uid: int,
    uid_count: int,
    *,
    processes: int,
    address_space: int,
    slots: int,
    cleanup_seconds: float,
) -> list[str]:
    """The container command of a batch: workdir, the tasks' uid range, per-task limits."""
    cleanup_ms = max(1, round(cleanup_seconds * 1000))
    limits = (first_uid, uid_count, processes, address_space, slots, cleanup_ms)
    return inside_command("batch", workdir, *(str(value) for value in limits))


class _BatchContainer:
    """One launched batch container: sends programs, demultiplexes framed results."""

    def __init__(
        self, api: docker.APIClient, launched: LaunchedContainer, nonce: bytes, uid_count: int
    ) -> None:
        self.api = api
        self.launched = launched
        self.nonce = nonce
        self.uid_count = uid_count
        """The uids leased for its tasks: it runs at most this many."""
        self.started = time.monotonic()
        self.used = 0
        self.lost: str | None = None
        self.retired = False
        """Set when the supervisor retired: it takes no run any more, those in flight go on."""
        self._lock = threading.Lock()
        self._waiting: dict[
            str, tuple[asyncio.AbstractEventLoop, asyncio.Future[tuple[BatchHead, bytes]]]
        ] = {}
        self._reader = threading.Thread(target=self._read, name="sandcrew-batch", daemon=True)
        self._send(nonce + b"\n")
        self._reader.start()

    def _send(self, data: bytes) -> None:
        connection = raw_connection(self.launched.connection)
        if connection is None:
            raise BatchContainerLost("its connection is closed")
        try:
            connection.sendall(data)
        except OSError as error:
            raise BatchContainerLost(f"cannot send the program ({error})") from None

    def submit(self, identifier: str) -> asyncio.Future[tuple[BatchHead, bytes]]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[BatchHead, bytes]] = loop.create_future()
        with self._lock:
            if self.lost is not None:
                raise BatchContainerLost(self.lost)
            self._waiting[identifier] = (loop, future)
            self.used += 1
        return future

    def send(self, data: bytes) -> None:
        with self._lock:
            self._send(data)

    def _read(self) -> None:
        connection = raw_connection(self.launched.connection)
        pending = bytearray()
        stdout = bytearray()
        try:
            while connection is not None:
                chunk = connection.recv(1 << 16)
                if not chunk:
                    break
                pending += chunk
                while len(pending) >= 8:
                    kind, size = pending[0], struct.unpack(">I", pending[4:8])[0]
                    if len(pending) < 8 + size:
                        break
                    if kind == 1:
                        stdout += pending[8 : 8 + size]
                    del pending[: 8 + size]
                self._dispatch(stdout)
        except (OSError, ValueError):
            pass
        self.fail("the container ended")

    def _dispatch(self, stdout: bytearray) -> None:
        while True:
            newline = stdout.find(b"\n")
            if newline < 0:
                return
            head = parse_batch_head(self.nonce, bytes(stdout[:newline]))
            end = newline + 1 + head.out_size + head.err_size
            if len(stdout) < end:
                return
            body = bytes(stdout[newline + 1 : end])
            del stdout[:end]
            with self._lock:
                if head.outcome == OUTCOME_ELSEWHERE:
                    self.retired = True
                waiting = self._waiting.pop(head.identifier, None)
            if waiting is not None:
                loop, future = waiting
                loop.call_soon_threadsafe(_resolve, future, (head, body))

    def fail(self, why: str) -> None:
        with self._lock:
            if self.lost is None:
                self.lost = why
            waiting, self._waiting = self._waiting, {}
        for loop, future in waiting.values():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_lose, future, why)

    def end(self) -> None:
        """Stop reading and remove the container."""
        self.fail("the batch ended")
        shutdown_connection(self.launched.connection)
        self._reader.join(timeout=10)
        discard_container(self.api, self.launched)


def _resolve(
    future: asyncio.Future[tuple[BatchHead, bytes]], frame: tuple[BatchHead, bytes]
) -> None:
    if not future.done():
        future.set_result(frame)


def _lose(future: asyncio.Future[tuple[BatchHead, bytes]], why: str) -> None:
    if not future.done():
        future.set_exception(BatchContainerLost(why))


class BatchSandbox(ClosedInThread):
    """Runs programs in one shared, hardened container, each as its own uid in its own directory.

    Implements the :class:`~sandcrew.sandbox.Sandbox` protocol. Up to ``slots``
    programs run at once; more wait for the container's room. A run whose
    container fails runs again alone in a container of its own (a
    :class:`DockerSandbox` run); the next runs get a new batch container.

    ``cleanup_seconds`` bounds how long the container deletes what one program left;
    past it the container retires and later runs go to a new one.
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        slots: int = 1,
        cleanup_seconds: float = CLEANUP_SECONDS,
        docker_client: docker.DockerClient | None = None,
    ) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1 (got {slots})")
        if not cleanup_seconds > 0:
            raise ValueError(f"cleanup_seconds must be > 0 (got {cleanup_seconds})")
        self.config = config if config is not None else SandboxConfig()
        if self.config.egress is not None:
            raise UserError(
                "network by policy (egress) needs a container per run: batch isolation runs "
                "many tasks in one container, whose proxy could not tell them apart; use task "
                "isolation"
            )
        self.slots = slots
        self.cleanup_seconds = cleanup_seconds
        self._client: docker.DockerClient | None = docker_client
        self._owns_client = docker_client is None
        self._started = False
        self._container: _BatchContainer | None = None
        self._launching = asyncio.Lock()
        # Twice the slots in flight: the supervisor starts a queued program the
        # moment a slot frees, without waiting for a round trip to this host.
        self._room = asyncio.Semaphore(self.programs_at_once)
        self._retired: list[_BatchContainer] = []
        self._alone = DockerSandbox(self.config, docker_client=docker_client)

    async def image_packages(self, language: str = "python") -> tuple[str, ...] | None:
        """The packages ``language``'s image adds (the batch runs the same images)."""
        return await self._alone.image_packages(language)

    @property
    def programs_at_once(self) -> int:
        """Programs this sandbox accepts at once: ``slots`` running, as many waiting for a slot.

        Callers that keep this many runs in flight keep every slot busy.
        """
        return QUEUED_PER_SLOT * self.slots

    @property
    def supported_languages(self) -> tuple[str, ...]:
        return tuple(language for language in SUPPORTED_LANGUAGES if language in self.config.images)

    async def start(self) -> None:
        """Connect to Docker and remove orphaned containers, once."""
        if not self._started:
            if self._client is None:
                self._client = await asyncio.to_thread(
                    connect_docker, timeout=self.config.docker_timeout
                )
            await asyncio.to_thread(reap_orphans, self._client)
            self._started = True

    async def _current(self, image: str) -> _BatchContainer:
        async with self._launching:
            container = self._container
            if container is not None and (
                container.lost is not None
                or container.retired
                or container.used >= container.uid_count
                or time.monotonic() - container.started > BATCH_LIFETIME_SECONDS
                or container.launched.image != image
            ):
                self._retire(container)
                await self._end_if_done(container)
                container = None
            if container is None:
                await self.start()
                assert self._client is not None
                container = await undone_if_cancelled(
                    lambda: self._launch(image), _BatchContainer.end
                )
                self._container = container
            return container

    def _retire(self, container: _BatchContainer) -> None:
        if self._container is container:
            self._container = None
        self._retired.append(container)

    async def _end_if_done(self, container: _BatchContainer) -> None:
        """Remove a retired or lost container once no run waits on it any more.

        Left to :meth:`close`, the containers a long batch retires would keep running
        (and keep their memory) until the end of the batch.
        """
        if container is self._container or container not in self._retired:
            return
        with container._lock:
            if container._waiting:
                return  # its last run to come back ends it
        self._retired.remove(container)
        await finish_in_thread(container.end)

    def _launch(self, image: str) -> _BatchContainer:
        assert self._client is not None
        api = self._client.api
        config, slots = self.config, self.slots
        sized = config.model_copy(
            update={
                "memory_bytes": config.memory_bytes * slots,
                "pids_limit": config.pids_limit * slots + 8,
                # The engine refuses more CPUs than the machine has.
                "cpus": min(config.cpus * slots, float(os.cpu_count() or 1)),
                "workdir_tmpfs_bytes": config.workdir_tmpfs_bytes * slots,
            }
        )
        uid_count = uids_per_block(config, UIDS_PER_CONTAINER)
        first_uid = take_uid_block(config, uid_count)
        with released_on_error(first_uid):
            options = create_options(
                api,
                sized,
                image=image,
                run_id=secrets.token_hex(8),
                deadline=time.time() + 2 * BATCH_LIFETIME_SECONDS,
                ids=(0, 0),
            )
            options["command"] = batch_supervisor_command(
                config.workdir,
                first_uid,
                uid_count,
                processes=config.pids_limit,
                address_space=config.memory_bytes,
                slots=slots,
                cleanup_seconds=self.cleanup_seconds,
            )
            options["environment"] = {}
            options["working_dir"] = "/"
            # The supervisor ends when its stdin closes, as when this process dies (a Ray
            # worker killed with its driver): the engine then removes the container at once.
            options["host_config"]["AutoRemove"] = True
            # The workdir is root's (tasks make their own directories in it); /tmp is
            # made unwritable by the supervisor before the first task.
            tmpfs = options["host_config"]["Tmpfs"]
            tmpfs[config.workdir] = (
                f"rw,nosuid,nodev,noexec,size={sized.workdir_tmpfs_bytes},uid=0,gid=0,mode=0711"
            )
        launch = Launch(api, options, pooled=False, uid=first_uid)
        try:
            launched = launch.run()
        except BaseException:
            with contextlib.suppress(SandboxError):
                launch.discard()
            raise
        try:
            return _BatchContainer(api, launched, secrets.token_hex(16).encode(), uid_count)
        except BaseException:
            discard_container(api, launched)
            raise

    async def run(
        self,
        code: str,
        language: str = "python",
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the program's own limit, enforced inside
        files: Mapping[str, bytes | Path] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecutionResult:
        """Run ``code`` as a task of the batch; if the container fails meanwhile, run it alone.

        Batch tasks take no input files (``files`` must be empty): a task's directory
        is made by the batch supervisor, which receives programs only. The supervisor
        sends a task's output when it ended: ``on_output`` is told it then.

        Which of the programs in flight broke a lost container cannot be
        known, so each of them runs again in a container of its own: the one
        that breaks containers fails only itself, the batch goes on in a new
        container. So does a run that a fault of the container met; a run the
        container did not start because it retired goes to the next one.
        """
        if files:
            raise UserError(
                "batch isolation runs programs without input files; "
                "use a container per task to pass files"
            )
        for _ in range(_BATCH_ATTEMPTS):
            try:
                return await tell_at_end(
                    on_output, await self._run_in_batch(code, language, timeout)
                )
            except _RunElsewhere:
                continue
            except (BatchContainerLost, _RunAlone):
                break
        return await self._alone.run(code, language, timeout=timeout, on_output=on_output)

    async def _run_in_batch(
        self, code: str, language: str, time_limit: float | None
    ) -> ExecutionResult:
        name = normalize_language(language)
        if name is None or name not in self.supported_languages:
            from ._errors import UnsupportedLanguageError

            raise UnsupportedLanguageError(language, self.supported_languages)
        limit = run_limit(self.config.timeout, time_limit)
        image = self.config.images[name]
        program = code.encode()
        async with self._room:
            container = await self._current(image)
            identifier = secrets.token_hex(8)
            header = (
                f"{identifier} {name} {len(program)} {max(1, round(limit * 1000))} "
                f"{self.config.max_output_bytes}\n"
            ).encode()
            future = container.submit(identifier)
            started = time.monotonic()
            # A queued program may first wait for one run of the longest limit and the
            # cleanup after it.
            waits = (
                limit
                + max(limit, self.config.timeout)
                + WATCHDOG_GRACE
                + self.cleanup_seconds
                + _ANSWER_SLACK
            )
            try:
                async with asyncio.timeout(waits):
                    await asyncio.to_thread(container.send, header + program)
                    head, body = await future
            except TimeoutError:
                container.fail("its supervisor did not answer in time")
                # Unblocks a send stuck on a supervisor that stopped reading.
                shutdown_connection(container.launched.connection)
                raise BatchContainerLost("its supervisor did not answer in time") from None
            except BatchContainerLost:
                container.fail("the container ended")
                raise
            duration = time.monotonic() - started
        await self._end_if_done(container)
        if head.outcome == OUTCOME_ALONE:
            raise _RunAlone
        if head.outcome == OUTCOME_ELSEWHERE:
            raise _RunElsewhere
        return self._result(head, body, container, name, limit, duration)

    def _result(
        self,
        head: BatchHead,
        body: bytes,
        container: _BatchContainer,
        language: str,
        limit: float,
        duration: float,
    ) -> ExecutionResult:
        stdout, stderr = body[: head.out_size], body[head.out_size :]
        return ExecutionResult(
            language=language,
            exit_code=TIMEOUT_EXIT_CODE if head.timed_out else head.status,
            stdout=stdout.decode("utf-8", errors="replace"),
            stderr=stderr.decode("utf-8", errors="replace"),
            timed_out=head.timed_out,
            oom_killed=False,
            stdout_truncated=head.out_cut,
            stderr_truncated=head.err_cut,
            duration=duration,
            image=container.launched.image,
            run_id=container.launched.run_id,
            timeout=limit,
            memory_limit_bytes=self.config.memory_bytes,
        )

    def close(self) -> None:
        """Remove every container of the batch and close the connection."""
        containers = [*self._retired, *([self._container] if self._container else [])]
        self._container, self._retired = None, []
        self._started = False
        try:
            for container in containers:
                container.end()
            self._alone.close()
        finally:
            if self._client is not None and self._owns_client:
                self._client.close()
                self._client = None
