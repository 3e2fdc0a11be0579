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
from sandcrew.integrations._outcome import TIMEOUT_EXIT_CODE
from sandcrew.sandbox import (
    CellResult,
    DockerSandbox,
    ExecutionResult,
    OutputCallback,
    Session,
    SessionLimits,
    normalize_language,
)

CELL_ERROR_EXIT_CODE = 1
"""A cell that raised, or whose interpreter had to be restarted."""


class SessionSandbox:
    """Runs Python blocks as cells of one session; the rest in throwaway containers.

    The session starts with the first Python run and ends with :meth:`aclose`, which
    removes its container. Input files go into the session once, before its first cell.
    """

    def __init__(self, sandbox: DockerSandbox) -> None:
        self._sandbox = sandbox
        self._session: Session | None = None
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
        config = self._sandbox.config
        limit = config.timeout if timeout is None else timeout
        async with self._turn:
            session = await self._open()
            for name, data in (files or {}).items():
                if name not in self._files_put:
                    await session.put_file(name, data)
                    self._files_put.add(name)
            cell = await session.run(code, timeout=limit, on_output=on_output)
        return execution_result_of(
            cell,
            image=session.image,
            run_id=session.container_name or "session",
            timeout=limit,
            memory_limit_bytes=config.memory_bytes,
        )

    async def _open(self) -> Session:
        if self._session is not None and self._session.closed:
            raise UserError(
                "the chat's session has ended (idle or lifetime limit, or its container was "
                "lost); start the solve again"
            )
        if self._session is None:
            await self.start()
            limits = SessionLimits(cell_timeout=self._sandbox.config.timeout)
            session = self._sandbox.session("python", limits=limits)
            await session.start()
            self._session = session
        return self._session

    async def aclose(self) -> None:
        """End the session (its container removed), then close the sandbox."""
        session, self._session = self._session, None
        try:
            if session is not None:
                await session.close()
        finally:
            await self._sandbox.aclose()

    def close(self) -> None:
        """Blocking twin of :meth:`aclose`, for code without an event loop."""
        asyncio.run(self.aclose())


def execution_result_of(
    cell: CellResult, *, image: str, run_id: str, timeout: float, memory_limit_bytes: int
) -> ExecutionResult:
    """A cell as a run: printed output, then its displayed values; the error on stderr."""
    shown = [
        text for output in cell.outputs if isinstance(text := output.data.get("text/plain"), str)
    ]
    stderr = cell.stderr
    if cell.error is not None:
        stderr += (cell.error.traceback or f"{cell.error.name}: {cell.error.value}") + "\n"
    if cell.state_lost:
        stderr += f"[the interpreter was restarted: {cell.reason or 'it ended'}]\n"
    if cell.timed_out:
        exit_code = TIMEOUT_EXIT_CODE
    elif cell.error is not None or cell.state_lost:
        exit_code = CELL_ERROR_EXIT_CODE
    else:
        exit_code = 0
    return ExecutionResult(
        language="python",
        exit_code=exit_code,
        stdout=cell.stdout + "".join(text + "\n" for text in shown),
        stderr=stderr,
        timed_out=cell.timed_out,
        stdout_truncated=cell.stdout_truncated,
        stderr_truncated=cell.stderr_truncated,
        duration=cell.duration,
        image=image,
        run_id=run_id,
        timeout=timeout,
        memory_limit_bytes=memory_limit_bytes,
    )
