"""What every session (and the pool that hands them out) derives from the rest.

``async with`` awaits ``start()`` (the block gets what it returns) and ``close()`` at
the end; a session's :meth:`~SessionBase.run` is its :meth:`~SessionBase.stream` with the
output handed to a callback. :class:`~sandcrew.sandbox.DockerSession` and
:class:`sandcrew.testing.ScriptedSession` inherit them, so the two cannot drift apart.
"""

from __future__ import annotations

import abc
import inspect
import posixpath
from collections.abc import AsyncIterator
from typing import Self

from ..core import UserError
from ._files import checked_path
from ._live import OutputCallback
from ._protocol import RunningCommand
from ._session_models import CellResult, CommandResult, OutputEvent, SessionEvent

CONTEXT_LANGUAGES = ("python",)
"""Languages whose sessions hold named contexts (fresh namespaces of one interpreter)."""


class ClosedAtExit(abc.ABC):
    """``async with`` awaits :meth:`start` and, whatever ends the block, :meth:`close`."""

    @abc.abstractmethod
    async def start(self) -> Self:
        """Start it; it is ready once this returns."""

    @abc.abstractmethod
    async def close(self) -> None:
        """End it and release what it holds; closing twice is fine."""

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


class SessionBase(ClosedAtExit):
    """A session's cells and paths: :meth:`stream` is each implementation's own; :meth:`run`
    and :meth:`file_path` are shared."""

    language: str
    workdir: str

    @abc.abstractmethod
    def stream(
        self,
        code: str,
        *,
        timeout: float | None = None,
        context: str | None = None,
    ) -> AsyncIterator[SessionEvent]:
        """Run one cell: its output and display outputs as they come, then its result."""

    @abc.abstractmethod
    async def start_command(
        self,
        command: str,
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the command's own limit
    ) -> RunningCommand:
        """Start a shell command beside the interpreter, as the session's user."""

    async def run_command(
        self,
        command: str,
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the command's own limit
    ) -> CommandResult:
        """:meth:`start_command` and wait for its result."""
        handle = await self.start_command(command, env=env, cwd=cwd, timeout=timeout)
        return await handle.wait()

    async def run(
        self,
        code: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the cell's own limit
        on_output: OutputCallback | None = None,
        context: str | None = None,
    ) -> CellResult:
        """Run one cell and return what it did; ``on_output`` (sync or async) sees its output
        as it comes. ``context`` names a namespace of its own (Python; made on first use)."""
        result: CellResult | None = None
        async for event in self.stream(code, timeout=timeout, context=context):
            if isinstance(event, CellResult):
                result = event
            elif isinstance(event, OutputEvent) and on_output is not None:
                told = on_output(event)
                if inspect.isawaitable(told):
                    await told
        assert result is not None
        return result

    def _check_context(self, name: str | None) -> None:
        if name is None:
            return
        if self.language not in CONTEXT_LANGUAGES:
            raise UserError(f"a {self.language} session has no contexts (only python has)")
        if not name or len(name) > 200 or not name.isprintable():
            raise UserError(f"a context name is 1 to 200 printable characters (got {name!r})")

    def file_path(self, name: str) -> str:
        """``name`` relative to the work folder: a relative name as it is, an absolute path
        inside the work folder without its prefix; anything else is refused."""
        if name.startswith("/"):
            normal = posixpath.normpath(name)
            root = self.workdir.rstrip("/")
            if normal == root:
                return "."
            if not normal.startswith(root + "/"):
                raise UserError(f"{name!r} is outside the session's work folder {self.workdir}")
            name = normal[len(root) + 1 :]
        if name in ("", "."):
            return "."
        return checked_path(name, what="file name")
