"""Sessions: one hardened container holding a live interpreter, cell after cell.

A :class:`Session` launches a container with every hardening of a run (the same
``create_options``: own seccomp profile, no capabilities for the code, read-only
root, no network, its own uid, memory, pids and CPU limits) whose command is the
session supervisor of :mod:`._inside.session`. The host sends requests on the
attach connection's stdin and a reader thread parses the supervisor's frames
(:mod:`._session_frames`) from its stdout; every frame is handled on the event
loop of the session's owner.

The container never outlives its owner: the supervisor ends when the attach
connection closes (a closed session, or an owner that exited in any way, even
SIGKILL: the engine closes the container's stdin), when the session was idle
for too long or reached its lifetime; the engine removes it then
(``AutoRemove``). The host also force-removes it on close, and its labels let
``sandcrew sandbox gc`` remove it after its deadline or once its owner is gone.
"""

from __future__ import annotations

import asyncio
import atexit
import codecs
import contextlib
import functools
import inspect
import itertools
import json
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from ..core import UserError
from ._container import Launch, LaunchedContainer, create_options, discard_container
from ._errors import EmptyCodeError, SandboxError, UnsupportedLanguageError
from ._files import check_work_dir_name
from ._inside_command import inside_command
from ._languages import normalize_language
from ._live import OutputCallback
from ._session_frames import FrameError, SessionFrames
from ._session_models import (
    CellError,
    CellResult,
    DisplayOutput,
    FileEntry,
    OutputEvent,
    SessionEvent,
    SessionLimits,
)
from ._streams import CappedBuffer, raw_connection, shutdown_connection
from ._uids import released_on_error, take_run_ids

if TYPE_CHECKING:
    from ._sandbox import DockerSandbox

SESSION_LANGUAGES = ("python", "bash", "javascript")
"""Languages a session can hold."""

_DRIVERS = {"python": "session_python", "bash": "session_bash"}
_JAVASCRIPT_DRIVER = Path(__file__).resolve().parent / "_inside" / "session_javascript.js"
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Past a cell's limit and grace: time for the supervisor to kill, restart and report.
_ANSWER_SLACK = 15.0
_FILE_ANSWER_SECONDS = 60.0
_RECV_SIZE = 64 * 1024
_FRAME_ALLOWANCE = 1024 * 1024

_live_lock = threading.Lock()
_live: set[Session] = set()
_exit_hook = {"registered": False}


class SessionClosedError(SandboxError):
    """The session has ended (closed, expired, or its container was lost); start a new one."""


class SessionLimitError(UserError):
    """This process already holds as many sessions as its limit allows."""


class SessionFileError(SandboxError):
    """A file request was refused inside the session (missing, too large, a link...)."""


class _Cell:
    """One cell in flight: what it printed so far, its events, its end."""

    def __init__(self, seq: int, output_limit: int, started: float) -> None:
        self.seq = seq
        self.started = started
        self.stdout = CappedBuffer(output_limit)
        self.stderr = CappedBuffer(output_limit)
        self.decoders = {
            "out": codecs.getincrementaldecoder("utf-8")("replace"),
            "err": codecs.getincrementaldecoder("utf-8")("replace"),
        }
        self.outputs: list[DisplayOutput] = []
        self.events: asyncio.Queue[SessionEvent | BaseException] = asyncio.Queue()
        self.done: asyncio.Future[CellResult] = asyncio.get_running_loop().create_future()
        self.overdue: asyncio.TimerHandle | None = None


class Session:
    """A live interpreter in a hardened container. Made by :meth:`DockerSandbox.session`.

    ``async with sandbox.session(language="python") as session:`` starts it;
    leaving the block closes it and removes its container. Cells run one at a
    time, in the order they are asked for.
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
        self._sandbox = sandbox
        self._container: LaunchedContainer | None = None
        self._api: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reader: threading.Thread | None = None
        self._nonce = secrets.token_hex(16).encode()
        self._closed_reason: str | None = None
        self._started = False
        self._turn = asyncio.Lock()
        self._ready: asyncio.Future[int] | None = None
        self._cell: _Cell | None = None
        self._seq = itertools.count(1)
        self._files: dict[str, asyncio.Future[tuple[dict[str, Any], bytes]]] = {}
        self._send_lock = threading.Lock()
        self.execution_count = 0
        """Cells the interpreter has counted (IPython's ``In[n]``)."""

    # -- life ---------------------------------------------------------------------------

    @property
    def container_name(self) -> str | None:
        """The Docker name of the session's container, once started."""
        return self._container.name if self._container is not None else None

    @property
    def closed(self) -> bool:
        return self._closed_reason is not None

    async def start(self) -> Self:
        """Launch the container and wait until the interpreter takes cells."""
        if self._started:
            return self
        with _live_lock:
            if len(_live) >= self.limits.max_sessions:
                raise SessionLimitError(
                    f"this process already holds {len(_live)} sessions, its limit; close one "
                    "or raise SessionLimits.max_sessions"
                )
            _live.add(self)
            if not _exit_hook["registered"]:
                _exit_hook["registered"] = True
                atexit.register(_close_all_at_exit)
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._ready = self._loop.create_future()
        try:
            await self._sandbox.start()
            self._api = self._sandbox.client.api
            launch = self._prepare_launch()
            try:
                self._container = await asyncio.shield(asyncio.to_thread(launch.run))
            except BaseException:
                await asyncio.shield(asyncio.to_thread(launch.discard))
                raise
            self._reader = threading.Thread(
                target=self._read, name=f"sandcrew-session-{self._container.name}", daemon=True
            )
            self._send(self._nonce + b"\n")
            self._reader.start()
            async with asyncio.timeout(self.limits.start_timeout + _ANSWER_SLACK):
                self.execution_count = await self._ready
        except BaseException:
            await self.close()
            raise
        return self

    def _prepare_launch(self) -> Launch:
        config, limits = self._sandbox.config, self.limits
        uid, gid = take_run_ids(config)
        with released_on_error(uid):
            options = create_options(
                self._api,
                config,
                image=self.image,
                run_id=secrets.token_hex(8),
                deadline=time.time() + limits.max_lifetime + config.reap_grace_seconds,
                ids=(uid, gid),
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
                "environment": self._environment(config.workdir),
            }
            options["command"] = inside_command(
                "session", json.dumps(settings), *_driver_command(self.language)
            )
            # The engine removes the container as soon as the supervisor ends it
            # (expiry, or the owner gone), whether or not this process is still there.
            options["host_config"]["AutoRemove"] = True
        return Launch(self._api, options, pooled=False, uid=uid)

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
        if self._closed_reason is None:
            self._closed_reason = "the session was closed"
        await asyncio.shield(asyncio.to_thread(self._close_blocking))
        self._fail_waiters(SessionClosedError(f"The session is closed: {self._closed_reason}"))

    def _close_blocking(self) -> None:
        container, reader = self._container, self._reader
        if container is not None:
            # Wakes the reader, which removes the container when it stops.
            shutdown_connection(container.connection)
        if reader is not None and reader.is_alive():
            reader.join(timeout=30)
        elif container is not None and reader is None:
            discard_container(self._api, container)
        with _live_lock:
            _live.discard(self)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # -- cells ----------------------------------------------------------------------------

    async def run(
        self,
        code: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the cell's limit, enforced inside
        on_output: OutputCallback | None = None,
    ) -> CellResult:
        """Run one cell and return what it did; ``on_output`` (sync or async) sees its output
        as it comes."""
        result: CellResult | None = None
        async for event in self.stream(code, timeout=timeout):
            if isinstance(event, CellResult):
                result = event
            elif isinstance(event, OutputEvent) and on_output is not None:
                told = on_output(event)
                if inspect.isawaitable(told):
                    await told
        assert result is not None
        return result

    async def stream(
        self,
        code: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the cell's limit, enforced inside
    ) -> AsyncIterator[SessionEvent]:
        """Run one cell: its output and display outputs as they come, then its :class:`CellResult`.

        Stopping the iteration early does not stop the cell: it runs to its end
        (or its limit) and the next cell waits for it.
        """
        cell = await self._begin(code, timeout)
        while True:
            event = await cell.events.get()
            if isinstance(event, BaseException):
                raise event
            yield event
            if isinstance(event, CellResult):
                return

    async def _begin(self, code: str, time_limit: float | None) -> _Cell:
        if not code.strip():
            raise EmptyCodeError()
        program = code.encode("utf-8", errors="surrogateescape")
        limit = self.limits.cell_timeout if time_limit is None else time_limit
        if not 0 < limit <= 86_400:
            raise UserError(f"timeout must be > 0 and at most a day (got {time_limit})")
        max_code = self._sandbox.config.max_code_bytes
        if len(program) > max_code:
            from ._errors import CodeTooLargeError

            raise CodeTooLargeError(len(program), max_code)
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
            header = f"run {cell.seq} {max(1, round(limit * 1000))} {len(program)}\n".encode()
            await asyncio.to_thread(self._send, header + program)
        except BaseException:
            self._cell = None
            self._turn.release()
            raise
        return cell

    async def interrupt(self) -> None:
        """Interrupt the running cell (``KeyboardInterrupt`` in it; the state is kept)."""
        self._check_open()
        await asyncio.to_thread(self._send, b"interrupt 0 0 0\n")

    async def restart(self) -> None:
        """Replace the interpreter by a fresh one (files stay; variables go).

        A running cell ends at once with ``state_lost``.
        """
        self._check_open()
        assert self._loop is not None
        # Not after the running cell: a restart is how a stuck cell is ended at once
        # (it reports state_lost).
        self._ready = self._loop.create_future()
        await asyncio.to_thread(self._send, b"restart 0 0 0\n")
        async with asyncio.timeout(self.limits.start_timeout + _ANSWER_SLACK):
            self.execution_count = await self._ready

    # -- files ----------------------------------------------------------------------------

    async def put_file(self, name: str, data: bytes | Path) -> None:
        """Write a file into the work dir (a host folder: every file in it, under ``name``).

        Missing folders are made; an existing file is replaced; a link on the
        way is refused, never followed.
        """
        check_work_dir_name(name)
        if isinstance(data, Path):
            for relative, path in await asyncio.to_thread(_files_of, data):
                content = await asyncio.to_thread(path.read_bytes)
                await self._put(f"{name}/{relative}" if relative else name, content)
            return
        await self._put(name, bytes(data))

    async def _put(self, name: str, content: bytes) -> None:
        if len(content) > self.limits.max_file_bytes:
            raise UserError(
                f"{name} has {len(content)} bytes, more than max_file_bytes "
                f"({self.limits.max_file_bytes})"
            )
        encoded = name.encode()
        await self._file_request("put", encoded, len(content), encoded + content)

    async def get_file(self, name: str, *, max_bytes: int | None = None) -> bytes:
        """The bytes of a file of the work dir (a regular file, reached without links)."""
        check_work_dir_name(name)
        limit = self.limits.max_file_bytes if max_bytes is None else max_bytes
        encoded = name.encode()
        _, body = await self._file_request("get", encoded, limit, encoded)
        return body

    async def list_files(self, path: str = ".") -> list[FileEntry]:
        """The entries of a folder of the work dir (``"."``: the work dir itself)."""
        if path not in ("", "."):
            check_work_dir_name(path)
        encoded = path.encode()
        answer, _ = await self._file_request("list", encoded, 0, encoded)
        entries = answer.get("entries")
        if not isinstance(entries, list):
            raise SessionFileError("the session answered the listing with something else")
        return [FileEntry.model_validate(entry) for entry in entries]

    async def _file_request(
        self, kind: str, name: bytes, second: int, payload: bytes
    ) -> tuple[dict[str, Any], bytes]:
        self._check_open()
        assert self._loop is not None
        ident = secrets.token_hex(6)
        waiter: asyncio.Future[tuple[dict[str, Any], bytes]] = self._loop.create_future()
        self._files[ident] = waiter
        try:
            header = f"{kind} {ident} {len(name)} {second}\n".encode()
            await asyncio.to_thread(self._send, header + payload)
            async with asyncio.timeout(_FILE_ANSWER_SECONDS):
                answer, body = await waiter
        finally:
            self._files.pop(ident, None)
        if "error" in answer:
            raise SessionFileError(f"{kind} {name.decode(errors='replace')}: {answer['error']}")
        return answer, body

    # -- the connection -------------------------------------------------------------------

    def _check_open(self) -> None:
        if not self._started:
            raise UserError("the session is not started; use `async with sandbox.session(...)`")
        if self._closed_reason is not None:
            raise SessionClosedError(f"The session is closed: {self._closed_reason}")

    def _send(self, data: bytes) -> None:
        container = self._container
        connection = raw_connection(container.connection) if container is not None else None
        if connection is None:
            raise SessionClosedError("The session's container connection is closed")
        with self._send_lock:
            try:
                connection.sendall(data)
            except OSError as error:
                raise SessionClosedError(f"The session's container is gone ({error})") from None

    def _read(self) -> None:
        """Reader thread: parse frames, hand them to the loop; remove the container at the end."""
        container = self._container
        assert container is not None
        limits = self.limits
        frames = SessionFrames(
            self._nonce,
            max_frame=max(limits.max_display_bytes, limits.max_file_bytes) + _FRAME_ALLOWANCE,
        )
        connection = raw_connection(container.connection)
        why = "the session's container ended"
        try:
            while connection is not None:
                chunk = connection.recv(_RECV_SIZE)
                if not chunk:
                    break
                for kind, payload in frames.feed(chunk):
                    self._post(self._on_frame, kind, payload)
        except FrameError as error:
            why = f"the session's container broke its framing ({error})"
        except OSError:
            pass
        finally:
            tail = frames.stderr_tail.decode("utf-8", "replace").strip()
            with contextlib.suppress(SandboxError):  # else gc removes it; the session is over
                discard_container(self._api, container)
            with _live_lock:
                _live.discard(self)
            self._post(self._on_connection_end, why, tail)

    def _post(self, callback: Callable[..., None], *arguments: Any) -> None:
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the owner's loop is closed: nobody waits
            loop.call_soon_threadsafe(callback, *arguments)

    def _on_frame(self, kind: str, payload: bytes) -> None:
        cell = self._cell
        if kind == "ready":
            count = _json_object(payload).get("count")
            if self._ready is not None and not self._ready.done():
                self._ready.set_result(count if isinstance(count, int) else 0)
        elif kind in ("out", "err") and cell is not None:
            buffer = cell.stdout if kind == "out" else cell.stderr
            buffer.feed(payload)
            text = cell.decoders[kind].decode(payload)
            if text:
                cell.events.put_nowait(
                    OutputEvent(stream="stdout" if kind == "out" else "stderr", text=text)
                )
        elif kind == "display" and cell is not None:
            output = _display_output(payload)
            if output is not None:
                cell.outputs.append(output)
                cell.events.put_nowait(output)
        elif kind == "end" and cell is not None:
            self._end_cell(cell, _json_object(payload))
        elif kind == "file":
            ident, _, rest = payload.partition(b"\n")
            head, _, body = rest.partition(b"\n")
            waiter = self._files.get(ident.decode(errors="replace"))
            if waiter is not None and not waiter.done():
                waiter.set_result((_json_object(head), body))
        elif kind in ("expired", "failed"):
            reason = str(_json_object(payload).get("reason") or kind)
            if kind == "failed" and "No module named 'IPython'" in reason:
                reason = (
                    f"{reason}. The image {self.image} has no IPython: "
                    "run `sandcrew images build` to rebuild it"
                )
            self._closed_reason = reason
            self._fail_waiters(SessionClosedError(f"The session ended: {self._closed_reason}"))

    def _end_cell(self, cell: _Cell, verdict: dict[str, Any]) -> None:
        if verdict.get("seq") != cell.seq:
            return
        count = verdict.get("count")
        if isinstance(count, int) and not isinstance(count, bool):
            self.execution_count = count
        else:
            count = None
        result = CellResult(
            stdout=cell.stdout.text(),
            stderr=cell.stderr.text(),
            stdout_truncated=cell.stdout.truncated or verdict.get("stdout_truncated") is True,
            stderr_truncated=cell.stderr.truncated or verdict.get("stderr_truncated") is True,
            outputs=cell.outputs,
            outputs_truncated=verdict.get("outputs_truncated") is True,
            error=_cell_error(verdict.get("error")),
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
        if not cell.done.done():
            if isinstance(outcome, CellResult):
                cell.done.set_result(outcome)
            else:
                cell.done.set_exception(outcome)
                cell.done.exception()  # retrieved: the stream reports it

    def _overdue(self, cell: _Cell) -> None:
        if self._cell is not cell:
            return
        self._closed_reason = "its supervisor did not answer in time"
        if self._container is not None:
            shutdown_connection(self._container.connection)
        self._fail_waiters(SessionClosedError(f"The session ended: {self._closed_reason}"))

    def _on_connection_end(self, why: str, diagnostics: str) -> None:
        if self._closed_reason is None:
            self._closed_reason = why + (f": {diagnostics}" if diagnostics else "")
        self._fail_waiters(SessionClosedError(f"The session ended: {self._closed_reason}"))

    def _fail_waiters(self, error: SessionClosedError) -> None:
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(error)
            self._ready.exception()
        for waiter in self._files.values():
            if not waiter.done():
                waiter.set_exception(error)
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


def _files_of(source: Path) -> list[tuple[str, Path]]:
    """A host file (``""``, itself) or the regular files of a host folder, links left out."""
    if not source.exists():
        raise UserError(f"no such file or folder: {source}")
    if not source.is_dir():
        return [("", source)]
    return [
        (path.relative_to(source).as_posix(), path)
        for path in sorted(source.rglob("*"))
        if path.is_file() and not path.is_symlink()
    ]


def _json_object(payload: bytes) -> dict[str, Any]:
    try:
        value = json.loads(payload)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _display_output(payload: bytes) -> DisplayOutput | None:
    import base64
    import binascii

    message = _json_object(payload)
    data, binary = message.get("data"), message.get("binary")
    if not isinstance(data, dict):
        return None
    binary_types = set(binary) if isinstance(binary, list) else set()
    bundle: dict[str, str | bytes] = {}
    for mime, value in data.items():
        if not isinstance(mime, str) or not isinstance(value, str):
            continue
        if mime in binary_types:
            try:
                bundle[mime] = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                bundle[mime] = value
        else:
            bundle[mime] = value
    return DisplayOutput(
        kind="result" if message.get("kind") == "result" else "display", data=bundle
    )


def _cell_error(value: Any) -> CellError | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return CellError(
            name=str(value.get("name", "Error")),
            value=str(value.get("value", "")),
            traceback=str(value.get("traceback", "")),
        )
    return CellError(name="Error", value=str(value))


def _close_all_at_exit() -> None:
    with _live_lock:
        sessions = list(_live)
    for session in sessions:
        with contextlib.suppress(Exception):
            session._close_blocking()
