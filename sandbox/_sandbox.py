"""DockerSandbox: run untrusted code, each time in a new hardened container."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import secrets
import threading
import time
from functools import partial
from types import TracebackType
from typing import Self

import docker

from ..core import ConfigurationError, UserError
from ._bootstrap import program_delivery
from ._config import SandboxConfig
from ._container import Launch, LaunchedContainer, create_options, discard_container
from ._docker_client import connect
from ._errors import CodeTooLargeError, EmptyCodeError, SandboxError, UnsupportedLanguageError
from ._execution import execute, judge
from ._languages import SUPPORTED_LANGUAGES, normalize_language
from ._pool import ContainerPool
from ._reaper import reap_orphans
from ._result import ExecutionResult
from ._threads import BackgroundWork, in_thread

# A pooled container that ended before it read its program is replaced by
# another; after this many, the run launches a container of its own.
_POOLED_ATTEMPTS = 2


class DockerSandbox:
    """Runs programs in throwaway Docker containers, one new container per run.

    The constructor has no side effects; :meth:`start` (or the first run, or
    ``async with``) connects to Docker, removes containers orphaned by crashed
    sandcrew processes and, with ``SandboxConfig.pool_size > 0``, fills a pool
    of pre-started, never-used containers per image. A client passed in is
    used as is and left open by :meth:`close`.

    A run's result comes back as soon as the program's exit and output are
    known; its container's removal finishes in the background, and
    :meth:`close` (or leaving ``async with``) waits for every removal and
    removes the pooled containers. Close the sandbox when done with it.
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        docker_client: docker.DockerClient | None = None,
    ) -> None:
        self.config = config if config is not None else SandboxConfig()
        self._client = docker_client
        self._owns_client = docker_client is None
        self._started = False
        # A thread lock, not an asyncio one: run_sync gives every call its own loop.
        self._start_lock = threading.Lock()
        self._pools: dict[str, ContainerPool] = {}
        self._atexit_pid = os.getpid()
        self._background = BackgroundWork("sandcrew-cleanup")

    @property
    def supported_languages(self) -> tuple[str, ...]:
        """Languages this sandbox can run: known to the sandbox and given an image."""
        return tuple(language for language in SUPPORTED_LANGUAGES if language in self.config.images)

    @property
    def client(self) -> docker.DockerClient:
        """The Docker client; only available once started."""
        if self._client is None or not self._started:
            raise UserError("The sandbox is not started; call `await sandbox.start()` first")
        return self._client

    async def start(self) -> None:
        """Connect to Docker (DOCKER_HOST or the current context), reap orphans once, fill pools.

        With a pool, returns once its first containers are started (or failed
        to start: the runs that need them report why).
        """
        if not self._started:
            await asyncio.to_thread(self._start_blocking)

    def _start_blocking(self) -> None:
        with self._start_lock:
            if self._started:
                return
            if self._client is None:
                self._client = connect(timeout=self.config.docker_timeout)
            reap_orphans(self._client)
            if self.config.pool_size > 0:
                self._open_pools(self._client.api)
            self._started = True
        for pool in list(self._pools.values()):
            pool.wait_until_filled(timeout=2 * self.config.docker_timeout)

    def _open_pools(self, api: docker.APIClient) -> None:
        images = sorted({self.config.images[language] for language in self.supported_languages})
        for image in images:
            pool = ContainerPool(
                size=self.config.pool_size,
                idle_seconds=self.config.pool_idle_seconds,
                run_timeout=self.config.timeout,
                reap_grace=self.config.reap_grace_seconds,
                launch=partial(self._launch_blocking, api, image, pooled=True),
                discard=partial(self._discard_later, api),
                background=self._background,
            )
            self._pools[image] = pool
            pool.start()
        # Pooled containers must not outlive a process that forgot to close the
        # sandbox; a forked child inherits the hook but not the pools' threads.
        self._atexit_pid = os.getpid()
        atexit.register(self._close_at_exit)

    def close(self) -> None:
        """Remove the pooled containers, wait for pending removals, close the connection.

        The connection is closed only if this sandbox opened it. Raises a
        :class:`SandboxError` if a container could not be removed.
        """
        with self._start_lock:
            try:
                for pool in self._pools.values():
                    pool.refuse_runs()
                had_pools = bool(self._pools)
                self._close_pools(list(self._pools))
                if had_pools:
                    atexit.unregister(self._close_at_exit)
                self._background.wait()
            finally:
                if self._client is not None and self._owns_client:
                    self._client.close()
                    self._client = None
                self._started = False

    def _close_pools(self, images: list[str]) -> None:
        """Close each pool, even when closing another was interrupted; forget it once closed."""
        if not images:
            return
        image, rest = images[0], images[1:]
        try:
            self._pools[image].close()
            del self._pools[image]
        finally:
            self._close_pools(rest)

    async def aclose(self) -> None:
        """:meth:`close` without blocking the event loop; cancelling it still lets it finish."""
        closing = asyncio.ensure_future(asyncio.to_thread(self.close))
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            await asyncio.wait({closing})
            raise

    def _close_at_exit(self) -> None:
        if os.getpid() != self._atexit_pid:
            return  # a forked child: the pools are its parent's
        with contextlib.suppress(SandboxError):
            self.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            await self.aclose()
        except SandboxError:
            if exc is None:
                raise  # otherwise the error that ended the block matters more

    def __enter__(self) -> Self:
        self._start_blocking()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            self.close()
        except SandboxError:
            if exc is None:
                raise

    # The timeout is the program's own limit, enforced by a kill timer inside.
    async def run(
        self,
        code: str,
        language: str = "python",
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> ExecutionResult:
        """Run ``code`` in a new (or pre-started, never-used) container and return what it did.

        Raises only for misuse (empty code, unsupported language, code too
        large) and infrastructure failures; the program's own failures, timeout
        and out-of-memory kill are reported in the result. The container is
        removed in the background; :meth:`close` waits for it.
        """
        return await self._run(code, language, timeout, wait_for_removal=False)

    def run_sync(
        self, code: str, language: str = "python", *, timeout: float | None = None
    ) -> ExecutionResult:
        """Blocking twin of :meth:`run`, for code that has no event loop.

        Returns once the run's container is removed. Ctrl-C cancels the run
        and still removes its container.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise UserError(
                "DockerSandbox.run_sync() cannot be called from a running event loop; "
                "use `await sandbox.run(...)` instead"
            )
        return asyncio.run(self._run(code, language, timeout, wait_for_removal=True))

    async def _run(
        self, code: str, language: str, time_limit: float | None, *, wait_for_removal: bool
    ) -> ExecutionResult:
        name, image, limit = self._check(code, language, time_limit)
        await self.start()
        api = self.client.api
        delivery = program_delivery(name, code, time_limit=limit)
        attempt = 0
        while True:
            attempt += 1
            container = await self._acquire(api, image, limit, pooled=attempt <= _POOLED_ATTEMPTS)
            result: ExecutionResult | None = None
            try:
                outcome = await execute(
                    api,
                    container,
                    delivery,
                    time_limit=limit,
                    output_limit=self.config.max_output_bytes,
                )
                # A pooled container that ended unseen while it waited ran nothing:
                # the program goes to another container.
                if not (outcome.never_started and container.pooled):
                    result = await judge(
                        self.config, container, outcome, language=name, time_limit=limit
                    )
            except BaseException:
                await asyncio.shield(in_thread(discard_container, api, container))
                raise
            if wait_for_removal:
                await asyncio.shield(in_thread(discard_container, api, container))
            else:
                self._discard_later(api, container)
            if result is not None:
                return result

    async def _acquire(
        self, api: docker.APIClient, image: str, time_limit: float, *, pooled: bool
    ) -> LaunchedContainer:
        """A started container waiting for its program: from the pool, or launched now."""
        pool = self._pools.get(image) if pooled else None
        if pool is not None:
            container = await pool.take(time_limit)
            if container is not None:
                return container
        options = create_options(
            api,
            self.config,
            image=image,
            run_id=secrets.token_hex(8),
            deadline=time.time() + time_limit + self.config.reap_grace_seconds,
        )
        launch = Launch(api, options, pooled=False)
        try:
            # Shielded: if this task is cancelled while the engine creates the
            # container, the launch still completes and is undone below.
            return await asyncio.shield(in_thread(launch.run))
        except BaseException:
            await asyncio.shield(in_thread(launch.discard))
            raise

    def _launch_blocking(
        self, api: docker.APIClient, image: str, deadline: float, *, pooled: bool
    ) -> LaunchedContainer:
        options = create_options(
            api,
            self.config,
            image=image,
            run_id=secrets.token_hex(8),
            deadline=deadline,
            pooled=pooled,
        )
        launch = Launch(api, options, pooled=pooled)
        try:
            return launch.run()
        except BaseException:
            # The launch's own error says more than a failed cleanup; the
            # reaper removes what is left once its deadline passes.
            with contextlib.suppress(SandboxError):
                launch.discard()
            raise

    def _discard_later(self, api: docker.APIClient, container: LaunchedContainer) -> None:
        self._background.submit(partial(discard_container, api, container))

    def _check(self, code: str, language: str, timeout: float | None) -> tuple[str, str, float]:
        name = normalize_language(language)
        supported = self.supported_languages
        if name is None or name not in supported:
            raise UnsupportedLanguageError(language, supported)
        if not code.strip():
            raise EmptyCodeError()
        try:
            size = len(code.encode())
        except UnicodeEncodeError as exc:
            raise UserError(
                f"The code is not valid text: the character at position {exc.start} "
                f"({code[exc.start]!r}) is a lone surrogate, which has no UTF-8 form; "
                "remove it or decode the source with errors='replace'"
            ) from None
        if size > self.config.max_code_bytes:
            raise CodeTooLargeError(size, self.config.max_code_bytes)
        limit = self.config.timeout if timeout is None else timeout
        if not limit > 0:
            raise ConfigurationError(f"timeout must be > 0 (got {limit:g})")
        return name, self.config.images[name], limit
