"""DockerSession: a live interpreter in one hardened container, cell after cell.

A session's container has every hardening of a run (the same ``create_options``:
own seccomp profile, no capabilities for the code, read-only root, no network,
its own uid, memory, pids and CPU limits); its command is the session supervisor
of :mod:`._inside.session`, spoken to through :class:`~._session_connection.SessionConnection`
in the protocol of :mod:`._inside.session_protocol`. Every frame is handled on
the event loop of the session's owner: cells (one at a time, in order), file
requests and commands beside the interpreter.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import functools
import itertools
import json
import logging
import secrets
import signal
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

from ..core import UserError, environment_problem
from . import _exit
from ._container import Launch, create_options
from ._errors import (
    CodeTooLargeError,
    EmptyCodeError,
    SessionClosedError,
    SessionExpiredError,
    SessionFileError,
    SessionFileNotFoundError,
    SessionLimitError,
    SessionLostError,
    SessionTimeoutError,
    UnsupportedLanguageError,
    code_not_text,
)
from ._files import files_below, read_input_file
from ._inside import session_protocol as protocol
from ._inside.session_channel import clean_count, clean_error
from ._inside_command import inside_command
from ._languages import normalize_language
from ._network_log import NetworkLog
from ._session_base import Session
from ._session_connection import SessionConnection
from ._session_models import (
    CellError,
    CellResult,
    CommandResult,
    DisplayOutput,
    FileEntry,
    OutputEvent,
    SessionEvent,
    SessionLimits,
)
from ._streams import CappedBuffer
from ._uids import released_on_error, take_run_ids

if TYPE_CHECKING:
    from ._egress_proxy import EgressChannel
    from ._sandbox import DockerSandbox

SESSION_LANGUAGES = ("python", "bash", "javascript")
"""Languages a session can hold."""

_DRIVERS = {"python": "session_python", "bash": "session_bash"}
_JAVASCRIPT_DRIVER = Path(__file__).resolve().parent / "_inside" / "session_javascript.js"
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Past a cell's limit and grace: time for the supervisor to kill, restart and report.
_ANSWER_SLACK = 15.0
_FILE_ANSWER_SECONDS = 60.0
_FRAME_ALLOWANCE = 1024 * 1024
_ABANDONED_INTERRUPT_SECONDS = 10.0
"""How long an abandoned cell's interrupt may take to be asked (never its end)."""
_T = TypeVar("_T")

logger = logging.getLogger(__name__)


class _Cell:
    """One cell in flight: what it printed so far, its events, its end."""

    def __init__(self, seq: int, output_limit: int, started: float) -> None:
        self.seq = seq
        self.started = started
        self.stdout = CappedBuffer(output_limit)
        self.stderr = CappedBuffer(output_limit)
        self.decoders = {
            protocol.OUT: codecs.getincrementaldecoder("utf-8")("replace"),
            protocol.ERR: codecs.getincrementaldecoder("utf-8")("replace"),
        }
        self.outputs: list[DisplayOutput] = []
        self.events: asyncio.Queue[SessionEvent | BaseException] = asyncio.Queue()
        self.overdue: asyncio.TimerHandle | None = None


class CommandHandle:
    """A command running beside the interpreter (:meth:`DockerSession.start_command`)."""

    def __init__(self, session: DockerSession, ident: str, output_limit: int) -> None:
        self.id = ident
        self._session = session
        self.started = time.monotonic()
        self.stdout = CappedBuffer(output_limit)
        self.stderr = CappedBuffer(output_limit)
        self.decoders = {
            "out": codecs.getincrementaldecoder("utf-8")("replace"),
            "err": codecs.getincrementaldecoder("utf-8")("replace"),
        }
        self.queue: asyncio.Queue[OutputEvent | CommandResult | BaseException] = asyncio.Queue()
        self.result: CommandResult | None = None
        self._done = asyncio.Event()

    async def events(self) -> AsyncIterator[OutputEvent | CommandResult]:
        """Its output as it comes, then its :class:`CommandResult`."""
        while True:
            event = await self.queue.get()
            if isinstance(event, BaseException):
                raise event
            yield event
            if isinstance(event, CommandResult):
                return

    async def wait(self) -> CommandResult:
        """Its result, once it has ended."""
        await self._done.wait()
        if self.result is None:
            raise SessionClosedError("The session ended before the command did")
        return self.result

    async def kill(self, number: int = signal.SIGKILL) -> None:
        """Send ``number`` to every process of the command."""
        await self._session._request(protocol.SIGNAL, self.id, {"signal": int(number)})

    def _end(self, outcome: CommandResult | BaseException) -> None:
        if isinstance(outcome, CommandResult):
            self.result = outcome
        self.queue.put_nowait(outcome)
        self._done.set()


class DockerSession(Session):
    """A live interpreter in a hardened container. Made by :meth:`DockerSandbox.session`.

    ``async with sandbox.session(language="python") as session:`` starts it;
    leaving the block closes it and removes its container. Cells run one at a
    time, in the order they are asked for. A :class:`~sandcrew.sandbox.Session`.
    """

    def __init__(
        self,
        sandbox: DockerSandbox,
        language: str = "python",
        *,
        image: str | None = None,
        limits: SessionLimits | None = None,
    ) -> None:
        name = normalize_language(language)
        if name is None or name not in SESSION_LANGUAGES:
            raise UnsupportedLanguageError(language, SESSION_LANGUAGES)
        if image is None:
            image = sandbox.config.images.get(name)
            if image is None:
                raise UnsupportedLanguageError(language, sandbox.supported_languages)
        self.language = name
        self.image = image
        self.limits = limits if limits is not None else SessionLimits()
        self.workdir = sandbox.config.workdir
        """The work folder inside the container: relative file names start there."""
        self._sandbox = sandbox
        self._connection: SessionConnection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed_by: SessionClosedError | None = None
        self._started = False
        self._turn = asyncio.Lock()
        self._ready: asyncio.Future[int] | None = None
        self._cell: _Cell | None = None
        self._seq = itertools.count(1)
        self._answers: dict[str, asyncio.Future[tuple[dict[str, Any], bytes]]] = {}
        self._commands: dict[str, CommandHandle] = {}
        self._egress: EgressChannel | None = None
        self.network: NetworkLog | None = None
        """Every request of a network-by-policy session, once it has ended."""
        self._fresh_contexts: set[str] = set()
        self._dropped_contexts: set[str] = set()
        self.execution_count = 0
        """Cells the interpreter has counted (IPython's ``In[n]``)."""

    # -- life ---------------------------------------------------------------------------

    @property
    def container_name(self) -> str | None:
        """The Docker name of the session's container, once started."""
        return self._connection.name if self._connection is not None else None

    @property
    def closed(self) -> bool:
        return self._closed_by is not None

    async def start(self) -> Self:
        """Launch the container and wait until the interpreter takes cells."""
        if self._started:
            return self
        cap = self.limits.max_sessions
        if not _exit.hold(self, self._close_blocking, kind="session", limit=cap):
            raise SessionLimitError(
                f"this process already holds {cap} sessions, its limit; close one, or raise "
                "the sessions.max_per_process setting (SessionLimits.max_sessions)"
            )
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._ready = self._loop.create_future()
        try:
            await self._sandbox.start()
            self._egress = await self._sandbox._open_egress()
            connection = self._prepare_connection()
            self._connection = connection
            await connection.open(self._loop, self._on_frame, self._on_connection_end)
            self.execution_count = await self._within(
                self.limits.start_timeout + _ANSWER_SLACK, self._ready, "start"
            )
        except BaseException:
            await self.close()
            raise
        return self

    def _prepare_connection(self) -> SessionConnection:
        config, limits = self._sandbox.config, self.limits
        api = self._sandbox.client.api
        uid, gid = take_run_ids(config)
        egress = None
        if self._egress is not None:
            self._egress.peer_uid = uid  # the proxy takes connections of this uid only
            egress = self._egress.mount()
        with released_on_error(uid):
            options = create_options(
                api,
                config,
                image=self.image,
                run_id=secrets.token_hex(8),
                deadline=time.time() + limits.max_lifetime + config.reap_grace_seconds,
                ids=(uid, gid),
                egress=egress,
            )
            settings = {
                "workdir": config.workdir,
                "uid": uid,
                "gid": gid,
                "language": self.language,
                "idle_seconds": limits.idle_timeout,
                "lifetime_seconds": limits.max_lifetime,
                "grace_seconds": limits.interrupt_grace,
                "start_seconds": limits.start_timeout,
                "output_bytes": config.max_output_bytes,
                "display_bytes": limits.max_display_bytes,
                "file_bytes": limits.max_file_bytes,
                "code_bytes": config.max_code_bytes,
                "environment": {
                    **self._environment(config.workdir),
                    **(egress.environment if egress is not None else {}),
                },
                "proxy_socket": None if egress is None else egress.container_socket,
            }
            options["command"] = inside_command(
                "session", json.dumps(settings), *_driver_command(self.language)
            )
            # The engine removes the container as soon as the supervisor ends it
            # (expiry, or the owner gone), whether or not this process is still there.
            options["host_config"]["AutoRemove"] = True
        largest = max(limits.max_display_bytes, limits.max_file_bytes, config.max_output_bytes)
        return SessionConnection(
            api,
            Launch(api, options, pooled=False, uid=uid),
            max_frame=largest + _FRAME_ALLOWANCE,
        )

    def _environment(self, workdir: str) -> dict[str, str]:
        environment = {"HOME": workdir, "PATH": _PATH, "LANG": "C.UTF-8", "TERM": "dumb"}
        if self.language == "python":
            environment.update(
                MPLBACKEND="module://matplotlib_inline.backend_inline",
                MPLCONFIGDIR="/tmp/matplotlib",
                IPYTHONDIR="/tmp/.ipython",
                PYTHONDONTWRITEBYTECODE="1",
            )
        return environment

    async def close(self) -> None:
        """End the interpreter and remove the container; closing twice is fine."""
        if self._closed_by is None:
            self._closed_by = SessionClosedError("The session is closed: it was closed")
        await asyncio.shield(asyncio.to_thread(self._close_blocking))
        self._fail_waiters(self._closed_by)

    def _close_blocking(self) -> None:
        if self._connection is not None:
            self._connection.close()
        self._close_egress()
        _exit.release(self)

    def _close_egress(self) -> None:
        egress, self._egress = self._egress, None
        if egress is not None:
            self.network = egress.close()

    # -- cells ----------------------------------------------------------------------------

    async def stream(
        self,
        code: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the cell's limit, enforced inside
        context: str | None = None,
        interrupt_if_abandoned: bool = False,
    ) -> AsyncGenerator[SessionEvent]:
        """Run one cell: its output and display outputs as they come, then its :class:`CellResult`.

        Stopping the iteration early does not stop the cell: it runs to its end
        (or its limit) and the next cell waits for it; with ``interrupt_if_abandoned``
        it is interrupted (a cell still waiting for its turn is never started). The
        same holds for a caller cancelled while its cell is being sent.
        """
        cell = await self._begin(code, timeout, context, interrupt_if_abandoned)
        ended = False
        try:
            while True:
                event = await cell.events.get()
                if isinstance(event, BaseException):
                    ended = True
                    raise event
                ended = isinstance(event, CellResult)
                yield event
                if ended:
                    return
        finally:
            if interrupt_if_abandoned and not ended and self._cell is cell:
                await asyncio.shield(self._interrupt_abandoned())

    async def _interrupt_abandoned(self) -> None:
        with contextlib.suppress(SessionClosedError, UserError, OSError, TimeoutError):
            await asyncio.wait_for(self.interrupt(), _ABANDONED_INTERRUPT_SECONDS)
        logger.info("a cell's consumer went away before its end; the cell was interrupted")

    async def _forget_context(self, name: str, *, drop: bool) -> None:
        # Both are sent with the next cell.
        if drop:
            self._fresh_contexts.discard(name)
            self._dropped_contexts.add(name)
        else:
            self._fresh_contexts.add(name)

    async def _begin(
        self,
        code: str,
        time_limit: float | None,
        context: str | None,
        interrupt_if_abandoned: bool = False,
    ) -> _Cell:
        if not code.strip():
            raise EmptyCodeError()
        try:
            program = code.encode("utf-8", errors="surrogateescape")
        except UnicodeEncodeError as error:
            raise code_not_text(code, error) from None
        limit = self.limits.cell_timeout if time_limit is None else time_limit
        if not 0 < limit <= 86_400:
            raise UserError(f"timeout must be > 0 and at most a day (got {time_limit})")
        max_code = self._sandbox.config.max_code_bytes
        if len(program) > max_code:
            raise CodeTooLargeError(len(program), max_code)
        self._check_context(context)
        self._check_open()
        await self._turn.acquire()  # released when the cell ends
        try:
            self._check_open()
            loop = asyncio.get_running_loop()
            cell = _Cell(next(self._seq), self._sandbox.config.max_output_bytes, time.monotonic())
            self._cell = cell
            cell.overdue = loop.call_later(
                limit + self.limits.interrupt_grace + self.limits.start_timeout + _ANSWER_SLACK,
                self._overdue,
                cell,
            )
            meta: dict[str, Any] = {"limit_ms": max(1, round(limit * 1000))}
            if context is not None:
                meta["context"] = context
                if context in self._fresh_contexts:
                    meta["fresh"] = True
            if self._dropped_contexts:
                meta["drop"] = sorted(self._dropped_contexts - {context})
            sending = asyncio.ensure_future(
                asyncio.to_thread(self._send, protocol.RUN, str(cell.seq), meta, program)
            )
            try:
                await asyncio.shield(sending)
            except asyncio.CancelledError:
                # The frame goes whole or not at all; once it went, the cell runs.
                await asyncio.wait({sending})
                if sending.exception() is not None:
                    raise
                left_while_sending = True
            else:
                left_while_sending = False
            self._fresh_contexts.discard(context or "")
            self._dropped_contexts.clear()
        except BaseException:
            self._cell = None
            self._turn.release()
            raise
        if left_while_sending:
            # Its caller went as it began: the cell keeps the turn until its end, like a
            # stream left early, and is interrupted when asked.
            if interrupt_if_abandoned:
                await asyncio.shield(self._interrupt_abandoned())
            raise asyncio.CancelledError
        return cell

    async def interrupt(self) -> None:
        """Interrupt the running cell (``KeyboardInterrupt`` in it; the state is kept).

        A cell still running ``interrupt_grace`` seconds later loses the interpreter.
        """
        await self._request(protocol.INTERRUPT, "0", {})

    async def restart(self) -> None:
        """Replace the interpreter by a fresh one (files stay; variables go).

        A running cell ends at once with ``state_lost``.
        """
        self._check_open()
        assert self._loop is not None
        # Not after the running cell: a restart is how a stuck cell is ended at once.
        self._ready = self._loop.create_future()
        await asyncio.to_thread(self._send, protocol.RESTART, "0", {})
        self.execution_count = await self._within(
            self.limits.start_timeout + _ANSWER_SLACK, self._ready, "restart"
        )

    # -- files ----------------------------------------------------------------------------

    async def put_file(self, name: str, data: bytes | Path) -> None:
        """Write a file into the work dir (a host folder: every file in it, under ``name``).

        Missing folders are made; an existing file is replaced; a link on the
        way is refused, never followed.
        """
        path = self.file_path(name)
        if isinstance(data, Path):
            for relative, source in await asyncio.to_thread(files_below, data):
                content = await asyncio.to_thread(
                    read_input_file,
                    source,
                    self.limits.max_file_bytes,
                    setting="SessionLimits.max_file_bytes",
                )
                await self._put(f"{path}/{relative}" if relative else path, content)
            return
        await self._put(path, bytes(data))

    async def _put(self, path: str, content: bytes) -> None:
        if len(content) > self.limits.max_file_bytes:
            raise UserError(
                f"{path} has {len(content)} bytes, more than max_file_bytes "
                f"({self.limits.max_file_bytes})"
            )
        await self._file("put", path, content=content)

    async def get_file(self, name: str, *, max_bytes: int | None = None) -> bytes:
        limit = self.limits.max_file_bytes if max_bytes is None else max_bytes
        _, body = await self._file("get", self.file_path(name), max_bytes=limit)
        return body

    async def list_files(self, path: str = ".") -> list[FileEntry]:
        answer, _ = await self._file("list", self.file_path(path))
        entries = answer.get("entries")
        if not isinstance(entries, list):
            raise SessionFileError("the session answered the listing with something else")
        return [FileEntry.model_validate(entry) for entry in entries]

    async def stat_file(self, path: str) -> FileEntry | None:
        answer, _ = await self._file("stat", self.file_path(path))
        entry = answer.get("entry")
        return None if entry is None else FileEntry.model_validate(entry)

    async def remove_file(self, path: str) -> None:
        await self._file("remove", self.file_path(path))

    async def rename_file(self, source: str, target: str) -> None:
        await self._file("rename", self.file_path(source), target=self.file_path(target))

    async def make_dir(self, path: str) -> bool:
        answer, _ = await self._file("mkdir", self.file_path(path))
        return answer.get("made") is True

    async def _file(
        self, operation: str, path: str, *, content: bytes = b"", **meta: Any
    ) -> tuple[dict[str, Any], bytes]:
        ident = secrets.token_hex(6)
        answer, body = await self._answered(
            ident, protocol.FILE, {"op": operation, "path": path, **meta}, content
        )
        if "error" in answer:
            error = SessionFileNotFoundError if answer.get("missing") else SessionFileError
            raise error(f"{operation} {path}: {answer['error']}")
        return answer, body

    # -- commands -------------------------------------------------------------------------

    async def start_command(
        self,
        command: str,
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the command's limit, enforced inside
    ) -> CommandHandle:
        """Start ``command`` (``bash -l -c``) beside the interpreter, as the session's user, in
        the work folder (or ``cwd`` inside it); its output comes as it is written."""
        if not command.strip():
            raise EmptyCodeError()
        problem = environment_problem(env or {})
        if problem is not None:
            raise UserError(problem)
        folder = self.workdir
        if cwd is not None:
            relative = self.file_path(cwd)
            folder = self.workdir if relative == "." else f"{self.workdir}/{relative}"
        self._check_open()
        ident = secrets.token_hex(6)
        handle = CommandHandle(self, ident, self._sandbox.config.max_output_bytes)
        self._commands[ident] = handle
        meta: dict[str, Any] = {"command": command, "env": dict(env or {}), "cwd": folder}
        if timeout is not None:
            if not 0 < timeout <= 86_400:
                raise UserError(f"timeout must be > 0 and at most a day (got {timeout})")
            meta["limit_ms"] = max(1, round(timeout * 1000))
        try:
            await self._request(protocol.COMMAND, ident, meta)
        except BaseException:
            self._commands.pop(ident, None)
            raise
        return handle

    # -- requests and frames ----------------------------------------------------------------

    def _check_open(self) -> None:
        if not self._started:
            raise UserError("the session is not started; use `async with sandbox.session(...)`")
        if self._closed_by is not None:
            raise self._closed_by

    def _send(self, kind: str, ident: str, meta: dict[str, Any], data: bytes = b"") -> None:
        connection = self._connection
        if connection is None:
            raise SessionClosedError("The session's container connection is closed")
        connection.send(kind, ident, meta, data)

    async def _request(self, kind: str, ident: str, meta: dict[str, Any]) -> None:
        self._check_open()
        await asyncio.to_thread(self._send, kind, ident, meta)

    async def _answered(
        self, ident: str, kind: str, meta: dict[str, Any], data: bytes = b""
    ) -> tuple[dict[str, Any], bytes]:
        self._check_open()
        assert self._loop is not None
        waiter: asyncio.Future[tuple[dict[str, Any], bytes]] = self._loop.create_future()
        self._answers[ident] = waiter
        try:
            await asyncio.to_thread(self._send, kind, ident, meta, data)
            return await self._within(_FILE_ANSWER_SECONDS, waiter, "file request")
        finally:
            self._answers.pop(ident, None)

    async def _within(self, seconds: float, waiting: Awaitable[_T], what: str) -> _T:
        try:
            async with asyncio.timeout(seconds):
                return await waiting
        except TimeoutError:
            raise SessionTimeoutError(
                f"the session's {what} got no answer within {seconds:g} s"
            ) from None

    def _on_frame(self, kind: str, payload: bytes) -> None:
        cell = self._cell
        if kind == protocol.READY:
            count = clean_count(_json_object(payload).get("count"))
            if self._ready is not None and not self._ready.done():
                self._ready.set_result(count or 0)
        elif kind in (protocol.OUT, protocol.ERR) and cell is not None:
            buffer = cell.stdout if kind == protocol.OUT else cell.stderr
            buffer.feed(payload)
            text = cell.decoders[kind].decode(payload)
            if text:
                cell.events.put_nowait(
                    OutputEvent(stream="stdout" if kind == protocol.OUT else "stderr", text=text)
                )
        elif kind == protocol.DISPLAY and cell is not None:
            output = DisplayOutput.from_wire(_json_object(payload))
            if output is not None:
                cell.outputs.append(output)
                cell.events.put_nowait(output)
        elif kind == protocol.END and cell is not None:
            self._end_cell(cell, _json_object(payload))
        elif kind == protocol.FILE_ANSWER:
            self._on_file_answer(payload)
        elif kind == protocol.COMMAND_OUTPUT:
            self._on_command_output(payload)
        elif kind == protocol.COMMAND_END:
            self._on_command_end(_json_object(payload))
        elif kind == protocol.EXPIRED:
            reason = str(_json_object(payload).get("reason") or "it expired")
            self._end_session(SessionExpiredError(f"The session ended: {reason}"))
        elif kind == protocol.FAILED:
            reason = str(_json_object(payload).get("reason") or "its interpreter failed")
            if "No module named 'IPython'" in reason:
                reason = (
                    f"{reason}. The image {self.image} has no IPython: "
                    "run `sandcrew images build` to rebuild it"
                )
            self._end_session(SessionLostError(f"The session ended: {reason}"))
        # LOST: the next cell reports state_lost with the reason; nothing waits for it now.

    def _on_file_answer(self, payload: bytes) -> None:
        try:
            ident, answer, body = protocol.read_file_answer(payload)
        except protocol.ProtocolError:
            return
        waiter = self._answers.get(ident)
        if waiter is not None and not waiter.done():
            waiter.set_result((answer, body))

    def _on_command_output(self, payload: bytes) -> None:
        try:
            ident, stream, data = protocol.read_command_output(payload)
        except protocol.ProtocolError:
            return
        handle = self._commands.get(ident)
        if handle is None:
            return
        (handle.stdout if stream == "out" else handle.stderr).feed(data)
        text = handle.decoders[stream].decode(data)
        if text:
            handle.queue.put_nowait(
                OutputEvent(stream="stdout" if stream == "out" else "stderr", text=text)
            )

    def _on_command_end(self, ending: dict[str, Any]) -> None:
        handle = self._commands.pop(str(ending.get("id")), None)
        if handle is None:
            return
        exit_code = ending.get("exit_code")
        signal_number = ending.get("signal")
        handle._end(
            CommandResult(
                id=handle.id,
                exit_code=exit_code if isinstance(exit_code, int) else -1,
                signal=signal_number if isinstance(signal_number, int) else None,
                error=str(ending["error"]) if ending.get("error") else None,
                stdout=handle.stdout.text(),
                stderr=handle.stderr.text(),
                stdout_truncated=handle.stdout.truncated or ending.get("stdout_truncated") is True,
                stderr_truncated=handle.stderr.truncated or ending.get("stderr_truncated") is True,
                timed_out=ending.get("timed_out") is True,
                duration=time.monotonic() - handle.started,
            )
        )

    def _end_cell(self, cell: _Cell, verdict: dict[str, Any]) -> None:
        if verdict.get("seq") != cell.seq:
            return
        count = clean_count(verdict.get("count"))
        if count is not None:
            self.execution_count = count
        error = clean_error(verdict.get("error"))
        result = CellResult(
            stdout=cell.stdout.text(),
            stderr=cell.stderr.text(),
            stdout_truncated=cell.stdout.truncated or verdict.get("stdout_truncated") is True,
            stderr_truncated=cell.stderr.truncated or verdict.get("stderr_truncated") is True,
            outputs=cell.outputs,
            outputs_truncated=verdict.get("outputs_truncated") is True,
            error=None if error is None else CellError(**error),
            execution_count=count,
            duration=time.monotonic() - cell.started,
            timed_out=verdict.get("timed_out") is True,
            state_lost=verdict.get("state_lost") is True,
            reason=str(verdict["reason"]) if verdict.get("reason") else None,
        )
        self._settle(cell, result)

    def _settle(self, cell: _Cell, outcome: CellResult | BaseException) -> None:
        if cell.overdue is not None:
            cell.overdue.cancel()
        if self._cell is cell:
            self._cell = None
            self._turn.release()
        cell.events.put_nowait(outcome)

    def _overdue(self, cell: _Cell) -> None:
        if self._cell is not cell:
            return
        if self._connection is not None:
            self._connection.shut()
        self._end_session(SessionLostError("The session ended: its supervisor did not answer"))

    def _on_connection_end(self, why: str, diagnostics: str) -> None:
        self._close_egress()
        _exit.release(self)
        if self._closed_by is None:
            self._end_session(
                SessionLostError(
                    "The session ended: " + why + (f": {diagnostics}" if diagnostics else "")
                )
            )
        else:
            self._fail_waiters(self._closed_by)

    def _end_session(self, error: SessionClosedError) -> None:
        if self._closed_by is None:
            self._closed_by = error
        self._fail_waiters(self._closed_by)

    def _fail_waiters(self, error: SessionClosedError) -> None:
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(error)
            self._ready.exception()
        for waiter in self._answers.values():
            if not waiter.done():
                waiter.set_exception(error)
        for handle in list(self._commands.values()):
            handle._end(error)
        self._commands.clear()
        if self._cell is not None:
            self._settle(self._cell, error)


def _driver_command(language: str) -> list[str]:
    if language == "javascript":
        return ["node", "-e", _javascript_driver()]
    # The driver runs as the session's uid with the image's site-packages (not
    # isolated like the supervisor): IPython lives there.
    command = inside_command(_DRIVERS[language])
    return ["python3", "-c", command[-1]]


@functools.cache
def _javascript_driver() -> str:
    return _JAVASCRIPT_DRIVER.read_text(encoding="utf-8")


def _json_object(payload: bytes) -> dict[str, Any]:
    try:
        return protocol.json_object(payload)
    except protocol.ProtocolError:
        return {}
