"""A test double of a :class:`~sandcrew.sandbox.Session`: scripted cells, no Docker.

For tests of front ends built on sessions (a REPL, a tool server, an executor): each
cell is answered by the next :class:`ScriptedCell` of a script (or, with a mapping, by
the first marker the code contains), and :meth:`ScriptedSession.assert_complete` checks
at the end that every scripted cell was used and nothing unscripted was asked. Files live
in memory, with the session's rules (relative names or absolute ones inside the work
folder, folders made on the way, the size cap); what a real session refuses (empty code,
a bad timeout, a context outside Python, any request once it is closed) is refused alike.
"""

from __future__ import annotations

import asyncio
import posixpath
import secrets
import signal
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn, Self

from sandcrew.core import UserError
from sandcrew.errors import EmptyCodeError, SessionFileError, SessionFileNotFoundError
from sandcrew.sandbox import (
    CellError,
    CellResult,
    CommandResult,
    DisplayOutput,
    FileEntry,
    OutputEvent,
    Session,
    SessionClosedError,
    SessionEvent,
    SessionLimits,
)
from sandcrew.sandbox._files import files_below, read_input_file

SCRIPTED_SESSION_IMAGE = "scripted"


@dataclass(frozen=True)
class ScriptedCell:
    """What a scripted cell "did"."""

    stdout: str = ""
    stderr: str = ""
    outputs: tuple[DisplayOutput, ...] = ()
    error: CellError | None = None
    timed_out: bool = False
    state_lost: bool = False
    reason: str | None = None
    duration: float = 0.01
    ends_session: str | None = None
    """Why the session ends once this cell has (its idle limit, a lost container), if it
    does: every later request raises :class:`~sandcrew.sandbox.SessionClosedError`."""


@dataclass(frozen=True)
class ScriptedOutcome:
    """What a scripted program or command "did": its exit code, output and timeout."""

    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False


@dataclass(frozen=True)
class ScriptedCommand(ScriptedOutcome):
    """What a scripted command "did"."""

    signal: int | None = None
    """The signal that ended it, if one did."""


@dataclass(frozen=True)
class RecordedCell:
    """One cell a :class:`ScriptedSession` was asked to run."""

    code: str
    timeout: float | None
    context: str | None


@dataclass(frozen=True)
class RecordedCommand:
    """One command a :class:`ScriptedSession` was asked to start."""

    command: str
    env: dict[str, str] | None
    cwd: str | None
    timeout: float | None


class _ScriptedRunningCommand:
    def __init__(self, result: CommandResult) -> None:
        self.id = result.id
        self._result = result
        self.signals: list[int] = []

    async def events(self) -> AsyncIterator[OutputEvent | CommandResult]:
        if self._result.stdout:
            yield OutputEvent(stream="stdout", text=self._result.stdout)
        if self._result.stderr:
            yield OutputEvent(stream="stderr", text=self._result.stderr)
        yield self._result

    async def wait(self) -> CommandResult:
        return self._result

    async def kill(self, number: int = signal.SIGKILL) -> None:
        self.signals.append(number)


@dataclass(eq=False)
class ScriptedSession(Session):
    """A :class:`~sandcrew.sandbox.Session` answering each cell from a script.

    ``cells`` is either a sequence (each cell gets the next entry, in order) or a mapping
    of markers (the first marker the code contains gives its outcome). A cell the script
    cannot answer raises ``AssertionError``, so it fails the test, and is remembered, so
    that :meth:`assert_complete` fails too when the front end caught the error; so does a
    request before :meth:`start`. After :meth:`close` every request raises
    :class:`~sandcrew.sandbox.SessionClosedError`, as a real session's do. ``commands``
    answers :meth:`start_command` by markers the same way.
    """

    cells: Sequence[ScriptedCell] | Mapping[str, ScriptedCell] = ()
    commands: Mapping[str, ScriptedCommand] = field(default_factory=dict)
    language: str = "python"
    image: str = SCRIPTED_SESSION_IMAGE
    limits: SessionLimits = field(default_factory=SessionLimits)
    workdir: str = "/workspace"
    execution_count: int = 0
    ran: list[RecordedCell] = field(default_factory=list)
    """Every cell asked for, in order."""
    commands_run: list[RecordedCommand] = field(default_factory=list)
    """Every command asked for, in order."""
    unanswered: list[str] = field(default_factory=list)
    """Requests the script could not answer (each also raised ``AssertionError``)."""
    files: dict[str, bytes] = field(default_factory=dict)
    """The work folder's files by relative path."""
    folders: set[str] = field(default_factory=set)
    """Folders made by :meth:`make_dir` (with their parents), by relative path."""
    interrupts: int = 0
    restarts: int = 0
    reset_contexts: list[str] = field(default_factory=list)
    dropped_contexts: list[str] = field(default_factory=list)
    started: bool = False
    _closed_by: SessionClosedError | None = None
    _used_markers: set[str] = field(default_factory=set)
    _used_commands: set[str] = field(default_factory=set)
    _next: int = 0

    @property
    def closed(self) -> bool:
        return self._closed_by is not None

    async def start(self) -> Self:
        self.started = True
        return self

    async def close(self) -> None:
        if self._closed_by is None:
            self._closed_by = SessionClosedError("The session is closed: it was closed")

    def assert_complete(self) -> None:
        """Every scripted cell and command was used, and nothing unscripted was asked
        (``AssertionError`` naming what was not)."""
        assert not self.unanswered, "unscripted requests:\n" + "\n---\n".join(self.unanswered)
        if isinstance(self.cells, Mapping):
            unused = [marker for marker in self.cells if marker not in self._used_markers]
            assert not unused, f"scripted cells never run: {unused}"
        else:
            left = len(self.cells) - self._next
            assert left == 0, f"{left} scripted cells never run"
        unused_commands = [marker for marker in self.commands if marker not in self._used_commands]
        assert not unused_commands, f"scripted commands never run: {unused_commands}"

    # -- cells ------------------------------------------------------------------------------

    async def stream(
        self,
        code: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - mirrors the protocol
        context: str | None = None,
        interrupt_if_abandoned: bool = False,
    ) -> AsyncGenerator[SessionEvent]:
        if not code.strip():
            raise EmptyCodeError()
        limit = self.limits.cell_timeout if timeout is None else timeout
        if not 0 < limit <= 86_400:
            raise UserError(f"timeout must be > 0 and at most a day (got {timeout})")
        self._check_context(context)
        self._check_open()
        self.ran.append(RecordedCell(code, timeout, context))
        scripted = self._answer(code)
        # A lost state means a fresh interpreter: it counts from one again.
        count = None if scripted.state_lost else self.execution_count + 1
        self.execution_count = count or 0
        await asyncio.sleep(0)
        try:
            if scripted.stdout:
                yield OutputEvent(stream="stdout", text=scripted.stdout)
            if scripted.stderr:
                yield OutputEvent(stream="stderr", text=scripted.stderr)
            for output in scripted.outputs:
                yield output
        except GeneratorExit:
            if interrupt_if_abandoned:
                self.interrupts += 1  # as the real session interrupts a cell left before its end
            raise
        if scripted.ends_session is not None:
            self._closed_by = SessionClosedError(f"The session ended: {scripted.ends_session}")
        yield CellResult(
            stdout=scripted.stdout,
            stderr=scripted.stderr,
            outputs=list(scripted.outputs),
            error=scripted.error,
            execution_count=count,
            duration=scripted.duration,
            timed_out=scripted.timed_out,
            state_lost=scripted.state_lost,
            reason=scripted.reason,
        )

    def _answer(self, code: str) -> ScriptedCell:
        if isinstance(self.cells, Mapping):
            for marker, scripted in self.cells.items():
                if marker in code:
                    self._used_markers.add(marker)
                    return scripted
            self._fail(f"ScriptedSession has no cell for this code:\n{code}")
        if self._next >= len(self.cells):
            self._fail(f"ScriptedSession ran out of scripted cells at:\n{code}")
        self._next += 1
        return self.cells[self._next - 1]

    def _fail(self, problem: str) -> NoReturn:
        self.unanswered.append(problem)
        raise AssertionError(problem)

    async def interrupt(self) -> None:
        self._check_open()
        self.interrupts += 1

    async def restart(self) -> None:
        self._check_open()
        self.restarts += 1
        self.execution_count = 0

    async def _forget_context(self, name: str, *, drop: bool) -> None:
        (self.dropped_contexts if drop else self.reset_contexts).append(name)

    # -- files ------------------------------------------------------------------------------

    async def put_file(self, name: str, data: bytes | Path) -> None:
        self._check_open()
        path = self.file_path(name)
        if not isinstance(data, Path):
            self._put(path, bytes(data))
            return
        for relative, source in await asyncio.to_thread(files_below, data):
            content = await asyncio.to_thread(
                read_input_file,
                source,
                self.limits.max_file_bytes,
                setting="SessionLimits.max_file_bytes",
            )
            self._put(f"{path}/{relative}" if relative else path, content)

    def _put(self, path: str, content: bytes) -> None:
        if len(content) > self.limits.max_file_bytes:
            raise UserError(
                f"{path} has {len(content)} bytes, more than max_file_bytes "
                f"({self.limits.max_file_bytes})"
            )
        self.files[path] = content

    async def get_file(self, name: str, *, max_bytes: int | None = None) -> bytes:
        self._check_open()
        path = self.file_path(name)
        if path not in self.files:
            raise SessionFileNotFoundError(f"get {path}: no such file")
        data = self.files[path]
        limit = self.limits.max_file_bytes if max_bytes is None else max_bytes
        if len(data) > limit:
            raise SessionFileError(f"get {path}: larger than {limit} bytes")
        return data

    async def list_files(self, path: str = ".") -> list[FileEntry]:
        self._check_open()
        folder = self.file_path(path)
        prefix = "" if folder == "." else folder + "/"
        names: dict[str, FileEntry] = {}
        for name, data in self.files.items():
            if name.startswith(prefix):
                first, _, rest = name[len(prefix) :].partition("/")
                names[first] = (
                    FileEntry(name=first, kind="folder", size=0)
                    if rest
                    else FileEntry(name=first, kind="file", size=len(data))
                )
        for made in self.folders:
            if made.startswith(prefix) and "/" not in made[len(prefix) :]:
                name = made[len(prefix) :]
                names.setdefault(name, FileEntry(name=name, kind="folder", size=0))
        return [names[name] for name in sorted(names)]

    async def stat_file(self, path: str) -> FileEntry | None:
        self._check_open()
        target = self.file_path(path)
        if target in self.files:
            return FileEntry(
                name=posixpath.basename(target), kind="file", size=len(self.files[target])
            )
        if target in self.folders or any(name.startswith(target + "/") for name in self.files):
            return FileEntry(name=posixpath.basename(target), kind="folder", size=0)
        return None

    async def remove_file(self, path: str) -> None:
        self._check_open()
        target = self.file_path(path)
        if await self.stat_file(target) is None:
            raise SessionFileNotFoundError(f"remove {target}: no such file")
        for name in [
            name for name in self.files if name == target or name.startswith(target + "/")
        ]:
            del self.files[name]
        self.folders = {
            made for made in self.folders if made != target and not made.startswith(target + "/")
        }

    async def rename_file(self, source: str, target: str) -> None:
        self._check_open()
        origin, destination = self.file_path(source), self.file_path(target)
        if origin not in self.files:
            raise SessionFileNotFoundError(f"rename {origin}: no such file")
        self.files[destination] = self.files.pop(origin)

    async def make_dir(self, path: str) -> bool:
        """Make a folder and its missing parents; False when it existed."""
        folder = self.file_path(path)
        if await self.stat_file(folder) is not None:
            return False
        parts = folder.split("/")
        self.folders.update("/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
        return True

    # -- commands ---------------------------------------------------------------------------

    async def start_command(
        self,
        command: str,
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - mirrors the protocol
    ) -> _ScriptedRunningCommand:
        if not command.strip():
            raise EmptyCodeError()
        if cwd is not None:
            self.file_path(cwd)
        if timeout is not None and not 0 < timeout <= 86_400:
            raise UserError(f"timeout must be > 0 and at most a day (got {timeout})")
        self._check_open()
        self.commands_run.append(RecordedCommand(command, env, cwd, timeout))
        for marker, scripted in self.commands.items():
            if marker in command:
                self._used_commands.add(marker)
                return _ScriptedRunningCommand(
                    CommandResult(
                        id=secrets.token_hex(6),
                        exit_code=scripted.exit_code,
                        stdout=scripted.stdout,
                        stderr=scripted.stderr,
                        timed_out=scripted.timed_out,
                        signal=scripted.signal,
                    )
                )
        self._fail(f"ScriptedSession has no command for:\n{command}")

    def _check_open(self) -> None:
        if not self.started:
            self._fail("ScriptedSession used before start()")
        if self._closed_by is not None:
            raise self._closed_by
