"""Where containers come from and where they go: connection, reaper, pools, removals, exit.

:class:`ContainerSupply` is the lifecycle half of :class:`~._sandbox.DockerSandbox`
(the run path is the other half): it connects to the engine, removes orphans
once, keeps the pools, hands out started containers, removes used ones in the
background and, at :meth:`ContainerSupply.close` or interpreter exit (:mod:`._exit`),
waits for every removal (:func:`~._signals.treat_sigterm_as_interrupt` makes a SIGTERM
end a process the way Ctrl-C does, so that happens then too).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import threading
import time
from functools import partial
from typing import TYPE_CHECKING

import docker

from ..core import UserError
from . import _exit
from ._config import SandboxConfig
from ._container import (
    Launch,
    LaunchedContainer,
    create_options,
    discard_container,
)
from ._deadlines import cold_label_deadline
from ._docker_client import connect_docker
from ._errors import SandboxError
from ._pool import ContainerPool
from ._reaper import reap_orphans
from ._threads import BackgroundWork
from ._uids import released_on_error, take_run_ids

if TYPE_CHECKING:
    from ._egress_proxy import EgressChannel


class ContainerSupply:
    """Started, never-used containers for runs, and their removal afterwards.

    A client passed in is used as is and left open by :meth:`close`.
    """

    def __init__(
        self, config: SandboxConfig, docker_client: docker.DockerClient | None, images: list[str]
    ) -> None:
        self._config = config
        self._images = images
        self._client = docker_client
        self._owns_client = docker_client is None
        self._started = False
        # A thread lock, not an asyncio one: run_sync gives every call its own loop.
        self._start_lock = threading.Lock()
        self._pools: dict[str, ContainerPool] = {}
        self._background = BackgroundWork("sandcrew-cleanup")
        self._api: docker.APIClient | None = None

    @property
    def started(self) -> bool:
        return self._started

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None or not self._started:
            raise UserError("The sandbox is not started; call `await sandbox.start()` first")
        return self._client

    def start(self) -> None:
        """Connect, reap orphans once, fill the pools; blocking."""
        with self._start_lock:
            if self._started:
                return
            if self._client is None:
                self._client = connect_docker(timeout=self._config.docker_timeout)
            self._api = self._client.api
            reap_orphans(self._client)
            if self._config.pool_size > 0:
                self._open_pools(self._client.api)
            self._started = True
        for pool in list(self._pools.values()):
            pool.wait_until_filled(timeout=2 * self._config.docker_timeout)

    def _open_pools(self, api: docker.APIClient) -> None:
        for image in self._images:
            pool = ContainerPool(
                size=self._config.pool_size,
                idle_seconds=self._config.pool_idle_seconds,
                run_timeout=self._config.timeout,
                reap_grace=self._config.reap_grace_seconds,
                launch=partial(self._launch_blocking, api, image, pooled=True),
                discard=self.discard_later,
                background=self._background,
            )
            self._pools[image] = pool
            pool.start()
        # Pooled containers must not outlive a process that forgot to close the
        # sandbox (a forked child inherits the table but not the pools' threads).
        _exit.hold(self, self._close_at_exit, kind="pools")

    async def acquire(
        self,
        image: str,
        time_limit: float,
        *,
        pooled: bool,
        egress: EgressChannel | None = None,
    ) -> LaunchedContainer:
        """A started container waiting for its program: from the pool, or launched now.

        A network-by-policy run (``egress``) always gets a container of its own, made
        with its channel's folder mounted; the channel accepts that container's uid only.
        """
        pool = self._pools.get(image) if pooled and egress is None else None
        if pool is not None:
            container = await pool.take(time_limit)
            if container is not None:
                return container
        api = self.client.api
        deadline = cold_label_deadline(time.time(), time_limit, self._config.reap_grace_seconds)
        launch = self._prepare_launch(api, image, deadline, pooled=False, egress=egress)
        try:
            # Shielded: if this task is cancelled while the engine creates the
            # container, the launch still completes and is undone below.
            return await asyncio.shield(asyncio.to_thread(launch.run))
        except BaseException:
            await asyncio.shield(asyncio.to_thread(launch.discard))
            raise

    def _prepare_launch(
        self,
        api: docker.APIClient,
        image: str,
        deadline: float,
        *,
        pooled: bool,
        egress: EgressChannel | None = None,
    ) -> Launch:
        ids = take_run_ids(self._config)
        with released_on_error(ids[0]):
            mount = None
            if egress is not None:
                egress.peer_uid = ids[0]
                mount = egress.mount()
            options = create_options(
                api,
                self._config,
                image=image,
                run_id=secrets.token_hex(8),
                deadline=deadline,
                ids=ids,
                pooled=pooled,
                egress=mount,
            )
        return Launch(api, options, pooled=pooled, uid=ids[0])

    def _launch_blocking(
        self, api: docker.APIClient, image: str, deadline: float, *, pooled: bool
    ) -> LaunchedContainer:
        launch = self._prepare_launch(api, image, deadline, pooled=pooled)
        try:
            return launch.run()
        except BaseException:
            # The launch's own error says more than a failed cleanup; the
            # reaper removes what is left once its deadline passes.
            with contextlib.suppress(SandboxError):
                launch.discard()
            raise

    def discard_later(self, container: LaunchedContainer) -> None:
        """Remove a used container in the background; :meth:`close` waits for it."""
        api = self._api if self._api is not None else self.client.api
        self._background.submit(partial(discard_container, api, container))

    async def discard_now(self, container: LaunchedContainer) -> None:
        """Remove a used container before returning, even if the caller is cancelled."""
        api = self.client.api
        await asyncio.shield(asyncio.to_thread(discard_container, api, container))

    def close(self) -> None:
        """Remove the pooled containers, wait for pending removals, close the connection.

        Raises a :class:`SandboxError` if a container could not be removed (an
        engine race during removal is retried, never raised).
        """
        with self._start_lock:
            try:
                for pool in self._pools.values():
                    pool.refuse_runs()
                had_pools = bool(self._pools)
                self._close_pools(list(self._pools))
                if had_pools:
                    _exit.release(self)
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

    def _close_at_exit(self) -> None:
        with contextlib.suppress(SandboxError):
            self.close()
