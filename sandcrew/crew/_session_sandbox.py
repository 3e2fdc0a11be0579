"""One session for a whole chat: the Sandbox protocol on a live interpreter.

``solve --session`` hands the crew a :class:`SessionSandbox`: each Python block the
runner runs is a cell of one session, so a fix can build on what earlier cells defined.
The runner is unchanged; it still gets an :class:`ExecutionResult` per run. Other
languages still run in a new container each (sessions hold one interpreter).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from sandcrew.core import UserError
from sandcrew.sandbox import (
    DockerSandbox,
    ExecutionResult,
    SandboxConfig,
    SandboxWithSessions,
    SessionClosedError,
    SessionLimits,
)
from sandcrew.sandbox._lazy_session import LazySession
from sandcrew.sandbox.code import normalize_language
from sandcrew.sandbox.live import OutputCallback


class SessionSandbox:
    """Runs Python blocks as cells of one session; the rest in throwaway containers.

    The session starts with the first Python run and ends with :meth:`aclose`, which
    removes its container. Input files go into the session once, before its first cell.

    ``config`` holds the settings cells are read under: a cell's limit when the runner
    gives none (``timeout``) and the memory limit its result reports. By default they are
    a :class:`~sandcrew.sandbox.DockerSandbox`'s own; give them for another sandbox (a
    test double), which otherwise gets :class:`~sandcrew.sandbox.SandboxConfig`'s defaults.
    """

    def __init__(
        self,
        sandbox: SandboxWithSessions,
        *,
        config: SandboxConfig | None = None,
        limits: SessionLimits | None = None,
    ) -> None:
        if config is None:
            config = sandbox.config if isinstance(sandbox, DockerSandbox) else SandboxConfig()
        self._sandbox = sandbox
        self._config = config
        # A cell's limit is a run's (the runner's contract); the rest is the [sessions] table.
        limits = (limits or SessionLimits()).model_copy(update={"cell_timeout": config.timeout})
        self._cells = LazySession(sandbox, "python", limits=limits)
        self._files_put: set[str] = set()
        self._turn = asyncio.Lock()

    @property
    def supported_languages(self) -> tuple[str, ...]:
        return self._sandbox.supported_languages

    async def start(self) -> None:
        await self._sandbox.start()

    async def image_packages(self, language: str = "python") -> tuple[str, ...] | None:
        return await self._sandbox.image_packages(language)

    async def run(
        self,
        code: str,
        language: str = "python",
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the cell's own limit
        files: Mapping[str, bytes | Path] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecutionResult:
        """A Python block as the session's next cell; another language in a new container."""
        if normalize_language(language) != "python":
            return await self._sandbox.run(
                code, language, timeout=timeout, files=files, on_output=on_output
            )
        limit = self._config.timeout if timeout is None else timeout
        async with self._turn:
            try:
                session = await self._cells.open()
            except SessionClosedError:
                raise UserError(
                    "the chat's session has ended (idle or lifetime limit, or its container was "
                    "lost); start the solve again"
                ) from None
            for name, data in (files or {}).items():
                if name not in self._files_put:
                    await session.put_file(name, data)
                    self._files_put.add(name)
            cell = await session.run(code, timeout=limit, on_output=on_output)
        return cell.as_run(
            language="python",
            image=session.image,
            run_id=getattr(session, "container_name", None) or "session",
            timeout=limit,
            memory_limit_bytes=self._config.memory_bytes,
        )

    async def aclose(self) -> None:
        """End the session (its container removed), then close the sandbox."""
        await self._cells.aclose()

    def close(self) -> None:
        """Blocking twin of :meth:`aclose`, for code without an event loop."""
        asyncio.run(self.aclose())
