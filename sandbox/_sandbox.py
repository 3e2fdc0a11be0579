"""DockerSandbox: run untrusted code, each time in a new hardened container.

This is the run path: check the request, take a container from the
:class:`~._lifecycle.ContainerSupply`, deliver the program, judge the outcome.
Where containers come from and how they are removed is the supply's business;
every deadline is decided in :mod:`._deadlines`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Self

import docker

from ..core import UserError
from ._config import SandboxConfig
from ._deadlines import run_limit
from ._errors import (
    CodeTooLargeError,
    EmptyCodeError,
    SandboxError,
    UnsupportedLanguageError,
    code_not_text,
)
from ._execution import execute, judge
from ._files import load_input_files
from ._images import image_packages
from ._languages import OPTIONAL_LANGUAGES, SUPPORTED_LANGUAGES, normalize_language
from ._lifecycle import ContainerSupply
from ._live import LiveOutput, OutputCallback
from ._result import ExecutionResult
from ._session_models import OutputEvent
from ._supervisor import program_delivery
from ._threads import ClosedInThread, finish_in_thread

if TYPE_CHECKING:
    from ._egress_proxy import EgressChannel, EgressNetwork
    from ._session import DockerSession
    from ._session_models import SessionLimits

# A pooled container that ended before it read its program is replaced by
# another; after this many, the run launches a container of its own.
_POOLED_ATTEMPTS = 2
# Room for the artifacts listing on top of the files' own bytes.
_LISTING_ALLOWANCE = 256 * 1024


class DockerSandbox(ClosedInThread):
    """Runs programs in throwaway Docker containers, one new container per run.

    Implements the :class:`~sandcrew.sandbox.Sandbox` protocol. The constructor
    has no side effects; :meth:`start` (or the first run, or ``async with``)
    connects to Docker, removes containers orphaned by crashed sandcrew
    processes and, with ``SandboxConfig.pool_size > 0``, fills a pool of
    pre-started, never-used containers per image. A client passed in is used
    as is and left open by :meth:`close`.

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
        egress_network: EgressNetwork | None = None,
    ) -> None:
        """``egress_network`` replaces the machine's resolver and connections for the
        proxy of network-by-policy runs (tests give :class:`sandcrew.testing.LoopbackNetwork`)."""
        self.config = config if config is not None else SandboxConfig()
        self._egress_network = egress_network
        # Pools hold containers for the default languages' images only: an optional
        # language's image (node) may be missing, and its runs start their own.
        images = sorted(
            {
                self.config.images[language]
                for language in self.supported_languages
                if language not in OPTIONAL_LANGUAGES
            }
        )
        self._supply = ContainerSupply(self.config, docker_client, images)
        self._image_packages: dict[str, tuple[str, ...] | None] = {}

    @property
    def supported_languages(self) -> tuple[str, ...]:
        """Languages this sandbox can run: known to the sandbox and given an image."""
        return tuple(language for language in SUPPORTED_LANGUAGES if language in self.config.images)

    @property
    def client(self) -> docker.DockerClient:
        """The Docker client; only available once started."""
        return self._supply.client

    async def start(self) -> None:
        """Connect to Docker (DOCKER_HOST or the current context), reap orphans once, fill pools.

        With a pool, returns once its first containers are started (or failed
        to start: the runs that need them report why).
        """
        if not self._supply.started:
            await asyncio.to_thread(self._supply.start)

    def close(self) -> None:
        """Remove the pooled containers, wait for pending removals, close the connection.

        The connection is closed only if this sandbox opened it. Raises a
        :class:`SandboxError` if a container could not be removed.
        """
        self._supply.close()

    async def __aexit__(self, *exc_info: object) -> None:
        try:
            await self.aclose()
        except SandboxError:
            if exc_info[1] is None:
                raise  # otherwise the error that ended the block matters more

    def __enter__(self) -> Self:
        self._supply.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.close()
        except SandboxError:
            if exc_info[1] is None:
                raise

    def session(
        self,
        language: str = "python",
        *,
        image: str | None = None,
        limits: SessionLimits | None = None,
    ) -> DockerSession:
        """A live interpreter in a hardened container; ``async with`` starts and removes it.

        ``image`` defaults to the language's image of the config (e.g.
        ``sandcrew/python-data`` for pandas and matplotlib). See :class:`DockerSession`;
        ``SyncSession(sandbox.session())`` is its blocking twin.
        """
        from ._session import DockerSession

        return DockerSession(self, language, image=image, limits=limits)

    async def image_packages(self, language: str = "python") -> tuple[str, ...] | None:
        """The Python packages the language's image adds to the standard library.

        Read from the image's ``sandcrew.packages`` label (``sandcrew images build``
        sets it): ``()`` for none, ``None`` when the image does not say or Docker
        cannot be asked (the runs then report why).
        """
        image = self.config.images.get(normalize_language(language) or language)
        if image is None:
            return None
        if image not in self._image_packages:
            try:
                await self.start()
            except SandboxError:
                return None
            # An image's label does not change while a sandbox uses it: asked once.
            self._image_packages[image] = await asyncio.to_thread(
                image_packages, self.client, image
            )
        return self._image_packages[image]

    async def run(
        self,
        code: str,
        language: str = "python",
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the program's own limit, enforced inside
        files: Mapping[str, bytes | Path] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecutionResult:
        """Run ``code`` in a new (or pre-started, never-used) container and return what it did.

        ``files`` maps names (relative, ``/``-separated) to bytes or host paths:
        they are put into the work dir before the program starts, read-only to it.
        What the program leaves in ``out/`` of its work dir comes back as
        ``result.artifacts``. ``on_output`` (sync or async) is called with each
        :class:`OutputEvent` as the program writes it, in order and before this
        returns; the chunks of a stream add up to the result's text (capped the
        same way). If it raises, the run is cancelled and its error raised.

        Raises only for misuse (empty code, unsupported language, code too
        large, bad or missing input files) and infrastructure failures; the
        program's own failures, timeout and out-of-memory kill are reported in
        the result. The container is removed in the background; :meth:`close`
        waits for it.
        """
        return await self._run(
            code, language, timeout, files, on_output=on_output, wait_for_removal=False
        )

    async def stream(
        self,
        code: str,
        language: str = "python",
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the program's own limit, enforced inside
        files: Mapping[str, bytes | Path] | None = None,
    ) -> AsyncIterator[OutputEvent | ExecutionResult]:
        """:meth:`run`, yielding each :class:`OutputEvent` as it comes and the result last.

        Leaving the loop early (``break``, an error) cancels the run and removes its container.
        """
        chunks: asyncio.Queue[OutputEvent | None] = asyncio.Queue()
        running = asyncio.ensure_future(
            self.run(code, language, timeout=timeout, files=files, on_output=chunks.put_nowait)
        )
        # Every chunk is queued before the run returns: the end mark comes after them.
        running.add_done_callback(lambda _: chunks.put_nowait(None))
        try:
            while (chunk := await chunks.get()) is not None:
                yield chunk
            yield await running
        finally:
            if not running.done():
                running.cancel()
                await asyncio.wait({running})

    def run_sync(
        self,
        code: str,
        language: str = "python",
        *,
        timeout: float | None = None,
        files: Mapping[str, bytes | Path] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecutionResult:
        """Blocking twin of :meth:`run`, for code that has no event loop.

        Returns once the run's container is removed. Ctrl-C cancels the run
        and still removes its container. ``on_output`` is called on this thread.
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
        return asyncio.run(
            self._run(code, language, timeout, files, on_output=on_output, wait_for_removal=True)
        )

    async def _run(
        self,
        code: str,
        language: str,
        time_limit: float | None,
        files: Mapping[str, bytes | Path] | None,
        *,
        on_output: OutputCallback | None,
        wait_for_removal: bool,
    ) -> ExecutionResult:
        config = self.config
        name, image, limit = self._check(code, language, time_limit)
        inputs = load_input_files(
            files,
            max_count=config.max_input_files,
            max_bytes=min(config.max_input_bytes, config.workdir_tmpfs_bytes),
        )
        await self.start()
        egress = await self._open_egress()
        try:
            result = await self._run_in_container(
                name,
                image,
                limit,
                code,
                inputs,
                on_output=on_output,
                wait_for_removal=wait_for_removal,
                egress=egress,
            )
        finally:
            log = None if egress is None else await finish_in_thread(egress.close)
        return result if log is None else result.model_copy(update={"network": log})

    async def _open_egress(self) -> EgressChannel | None:
        """The run's channel of the host proxy, when the config asks for network by policy."""
        policy = self.config.egress
        if policy is None:
            return None
        if not self.client.api.base_url.startswith("http+docker://"):
            raise SandboxError(
                "network by policy (egress) needs a Docker engine on this machine: the proxy's "
                "socket is mounted into the container, which a remote engine cannot do"
            )
        from ._egress_proxy import egress_proxy

        try:
            return await asyncio.to_thread(
                egress_proxy().open_channel, policy, network=self._egress_network
            )
        except ValueError as error:
            raise UserError(str(error)) from None
        except OSError as error:
            raise SandboxError(f"cannot open the network proxy's socket: {error}") from None

    async def _run_in_container(
        self,
        name: str,
        image: str,
        limit: float,
        code: str,
        inputs: dict[str, bytes],
        *,
        on_output: OutputCallback | None,
        wait_for_removal: bool,
        egress: EgressChannel | None,
    ) -> ExecutionResult:
        config = self.config
        api = self.client.api
        delivery = program_delivery(
            name,
            code,
            time_limit=limit,
            files=inputs,
            artifact_bytes=config.max_artifact_bytes,
            artifact_count=config.max_artifacts,
        )
        artifact_limit = (
            config.max_artifact_bytes + _LISTING_ALLOWANCE if config.max_artifacts else 0
        )
        attempt = 0
        while True:
            attempt += 1
            pooled = attempt <= _POOLED_ATTEMPTS
            container = await self._supply.acquire(image, limit, pooled=pooled, egress=egress)
            result: ExecutionResult | None = None
            live = None if on_output is None else LiveOutput(on_output, asyncio.get_running_loop())
            try:
                executing = execute(
                    api,
                    container,
                    delivery,
                    time_limit=limit,
                    output_limit=config.max_output_bytes,
                    artifact_limit=artifact_limit,
                    on_output=None if live is None else live.receive,
                )
                outcome = await (executing if live is None else live.around(executing))
                # A pooled container that ended unseen while it waited ran nothing:
                # the program goes to another container.
                if not (outcome.never_started and container.pooled):
                    result = await judge(
                        self.config, container, outcome, language=name, time_limit=limit
                    )
            except BaseException:
                await self._supply.discard_now(container)
                raise
            if wait_for_removal:
                await self._supply.discard_now(container)
            else:
                self._supply.discard_later(container)
            if result is not None:
                return result

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
            raise code_not_text(code, exc) from None
        if size > self.config.max_code_bytes:
            raise CodeTooLargeError(size, self.config.max_code_bytes)
        return name, self.config.images[name], run_limit(self.config.timeout, timeout)
