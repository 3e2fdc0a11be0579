"""The blocking twin of a session, for code without an event loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from ..core import UserError
from ._errors import SandboxError
from ._session_base import Session
from ._session_models import CellResult, CommandResult, FileEntry, OutputEvent


class SyncSession:
    """The blocking twin of a session, for code without an event loop.

    ``with SyncSession(sandbox.session()) as session: session.run(...)``.
    Every call runs on one private event loop; Ctrl-C during :meth:`run`
    interrupts the cell (its state is kept) and raises ``KeyboardInterrupt``.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self._runner: asyncio.Runner | None = None

    def _call(self, work: Any) -> Any:
        if self._runner is None:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                pass
            else:
                work.close()
                raise UserError(
                    "a sync session cannot be used inside a running event loop; "
                    "use `async with sandbox.session(...)` instead"
                )
            self._runner = asyncio.Runner()
        return self._runner.run(work)

    def start(self) -> Self:
        self._call(self.session.start())
        return self

    def run(
        self,
        code: str,
        *,
        timeout: float | None = None,
        on_output: Callable[[OutputEvent], None] | None = None,
        context: str | None = None,
    ) -> CellResult:
        try:
            result: CellResult = self._call(
                self.session.run(code, timeout=timeout, on_output=on_output, context=context)
            )
        except KeyboardInterrupt:
            with contextlib.suppress(SandboxError, UserError):
                self._call(self.session.interrupt())
            raise
        return result

    def put_file(self, name: str, data: bytes | Path) -> None:
        self._call(self.session.put_file(name, data))

    def get_file(self, name: str, *, max_bytes: int | None = None) -> bytes:
        data: bytes = self._call(self.session.get_file(name, max_bytes=max_bytes))
        return data

    def list_files(self, path: str = ".") -> list[FileEntry]:
        entries: list[FileEntry] = self._call(self.session.list_files(path))
        return entries

    def stat_file(self, path: str) -> FileEntry | None:
        entry: FileEntry | None = self._call(self.session.stat_file(path))
        return entry

    def remove_file(self, path: str) -> None:
        self._call(self.session.remove_file(path))

    def rename_file(self, source: str, target: str) -> None:
        self._call(self.session.rename_file(source, target))

    def make_dir(self, path: str) -> bool:
        made: bool = self._call(self.session.make_dir(path))
        return made

    def run_command(
        self,
        command: str,
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
    ) -> CommandResult:
        result: CommandResult = self._call(
            self.session.run_command(command, env=env, cwd=cwd, timeout=timeout)
        )
        return result

    def restart(self) -> None:
        self._call(self.session.restart())

    def close(self) -> None:
        try:
            self._call(self.session.close())
        finally:
            if self._runner is not None:
                self._runner.close()
                self._runner = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
