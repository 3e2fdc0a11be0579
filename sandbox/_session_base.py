"""What a session is: :class:`Session`, the one definition every session derives from.

``async with`` awaits ``start()`` (the block gets what it returns) and ``close()`` at
the end; a session's :meth:`~Session.run` is its :meth:`~Session.stream` with the
output handed to a callback. :class:`~sandcrew.sandbox.DockerSession` and
:class:`sandcrew.testing.ScriptedSession` inherit them, so the two cannot drift apart.
"""

from __future__ import annotations

import abc
import inspect
import posixpath
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import TYPE_CHECKING, Self

from ..core import UserError
from ._files import checked_path
from ._live import OutputCallback
from ._session_models import (
    CellResult,
    CommandResult,
    FileEntry,
    OutputEvent,
    SessionEvent,
    SessionLimits,
)

if TYPE_CHECKING:
    from ._protocol import RunningCommand

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


class Session(ClosedAtExit):
    """A live interpreter between cells: variables, imports and files persist.

    :class:`~sandcrew.sandbox.DockerSession` is the implementation;
    :class:`sandcrew.testing.ScriptedSession` the test double. A cell's own
    failures are data in its :class:`CellResult`; only misuse
    (:class:`~sandcrew.errors.UserError`) and an ended session
    (:class:`~sandcrew.sandbox.SessionClosedError`) raise. :meth:`stream` and the
    requests are each implementation's own; :meth:`run`, :meth:`run_command` and
    :meth:`file_path` are shared.
    """

    language: str
    image: str
    limits: SessionLimits
    workdir: str
    execution_count: int

    @property
    @abc.abstractmethod
    def closed(self) -> bool:
        """Whether it has ended (closed, an idle or lifetime limit, a lost container)."""

    @abc.abstractmethod
    def stream(
        self,
        code: str,
        *,
        timeout: float | None = None,
        context: str | None = None,
        interrupt_if_abandoned: bool = False,
    ) -> AsyncGenerator[SessionEvent]:
        """Run one cell: its output and display outputs as they come, then its result.

        ``interrupt_if_abandoned``: when the iteration stops before the result (the
        consumer cancelled, or the generator closed), the cell is interrupted if it is
        running; a cell still waiting for its turn is never started.
        """

    @abc.abstractmethod
    async def interrupt(self) -> None:
        """Interrupt the running cell (``KeyboardInterrupt`` in it; the state is kept)."""

    @abc.abstractmethod
    async def restart(self) -> None:
        """Replace the interpreter by a fresh one (files stay; variables go)."""

    async def reset_context(self, name: str) -> None:
        """The context ``name`` starts afresh at its next cell (its variables are gone)."""
        self._check_context(name)
        await self._forget_context(name, drop=False)

    async def drop_context(self, name: str) -> None:
        """Forget the context ``name`` and its variables."""
        self._check_context(name)
        await self._forget_context(name, drop=True)

    @abc.abstractmethod
    async def _forget_context(self, name: str, *, drop: bool) -> None:
        """Forget a checked context's variables (``drop``: the context itself too)."""

    @abc.abstractmethod
    async def put_file(self, name: str, data: bytes | Path) -> None:
        """Write a file into the work dir (a host folder: every file in it, under ``name``)."""

    @abc.abstractmethod
    async def get_file(self, name: str, *, max_bytes: int | None = None) -> bytes:
        """The bytes of a file of the work dir (a regular file, reached without links)."""

    @abc.abstractmethod
    async def list_files(self, path: str = ".") -> list[FileEntry]:
        """The entries of a folder of the work dir (``"."``: the work dir itself)."""

    @abc.abstractmethod
    async def stat_file(self, path: str) -> FileEntry | None:
        """The entry at ``path`` (a link is described, not followed), or ``None``."""

    @abc.abstractmethod
    async def remove_file(self, path: str) -> None:
        """Remove a file, a link, or a folder with everything in it."""

    @abc.abstractmethod
    async def rename_file(self, source: str, target: str) -> None:
        """Move ``source`` to ``target`` (missing folders of the target are made)."""

    @abc.abstractmethod
    async def make_dir(self, path: str) -> bool:
        """Make a folder (and its missing parents); False when it existed."""

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
