"""DockerSandbox: run untrusted code, each time in a new hardened container."""

from __future__ import annotations

import asyncio
import secrets
import threading
from types import TracebackType
from typing import Self

import docker

from sandcrew.errors import ConfigurationError, UserError

from ._config import SandboxConfig
from ._container import run_in_new_container
from ._docker_client import connect
from ._errors import CodeTooLargeError, EmptyCodeError, UnsupportedLanguageError
from ._languages import SUPPORTED_LANGUAGES, normalize_language
from ._reaper import reap_orphans
from ._result import ExecutionResult


class DockerSandbox:
    """Runs programs in throwaway Docker containers, one new container per run.

    The constructor has no side effects; :meth:`start` (or the first run, or
    ``async with``) connects to Docker and removes containers orphaned by
    crashed sandcrew processes. A client passed in is used as is and left open
    by :meth:`close`.
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
        """Connect to Docker (DOCKER_HOST or the current context) and reap orphans once."""
        if not self._started:
            await asyncio.to_thread(self._start_blocking)

    def _start_blocking(self) -> None:
        with self._start_lock:
            if self._started:
                return
            if self._client is None:
                self._client = connect(timeout=self.config.docker_timeout)
            reap_orphans(self._client)
            self._started = True

    def close(self) -> None:
        """Close the Docker connection if this sandbox opened it."""
        with self._start_lock:
            if self._client is not None and self._owns_client:
                self._client.close()
                self._client = None
            self._started = False

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __enter__(self) -> Self:
        self._start_blocking()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # The timeout is the program's own limit, enforced by a kill timer inside.
    async def run(
        self,
        code: str,
        language: str = "python",
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> ExecutionResult:
        """Run ``code`` in a new container and return what it did.

        Raises only for misuse (empty code, unsupported language, code too
        large) and infrastructure failures; the program's own failures, timeout
        and out-of-memory kill are reported in the result.
        """
        name, image, limit = self._check(code, language, timeout)
        await self.start()
        assert self._client is not None
        return await run_in_new_container(
            self._client,
            self.config,
            code=code,
            language=name,
            image=image,
            run_id=secrets.token_hex(8),
            time_limit=limit,
        )

    def run_sync(
        self, code: str, language: str = "python", *, timeout: float | None = None
    ) -> ExecutionResult:
        """Blocking twin of :meth:`run`, for code that has no event loop.

        Ctrl-C cancels the run and still removes its container.
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
        return asyncio.run(self.run(code, language, timeout=timeout))

    def _check(self, code: str, language: str, timeout: float | None) -> tuple[str, str, float]:
        name = normalize_language(language)
        supported = self.supported_languages
        if name is None or name not in supported:
            raise UnsupportedLanguageError(language, supported)
        if not code.strip():
            raise EmptyCodeError()
        size = len(code.encode())
        if size > self.config.max_code_bytes:
            raise CodeTooLargeError(size, self.config.max_code_bytes)
        limit = self.config.timeout if timeout is None else timeout
        if not limit > 0:
            raise ConfigurationError(f"timeout must be > 0 (got {limit:g})")
        return name, self.config.images[name], limit
