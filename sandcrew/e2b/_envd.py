"""envd's surface: ``/health``, ``/files`` and the Connect calls of the filesystem and processes.

Paths are the sandbox's: ``/home/user/a.txt`` and ``a.txt`` are the same file, the one
the code and the commands see; a path outside ``/home/user`` is refused (the SDK's
``InvalidArgumentException``). Commands run beside the interpreter as the session's
user, in the same container (``bash -l -c``, as the SDK asks); their output streams as
it comes, and a client that goes away kills its command. What envd has and the server
does not (PTY, stdin, directory watch, reattaching) answers ``unimplemented``.
"""

from __future__ import annotations

import base64
import posixpath
import shlex
import signal
import stat
import zlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sandcrew.core import UserError
from sandcrew.e2b._connect import (
    HTTP_STATUS,
    STREAM_CONTENT_TYPE,
    UNARY_CONTENT_TYPE,
    Code,
    ConnectError,
    end_of_stream,
    envelope,
    first_message,
    json_object,
    string_field,
    timeout_seconds,
)
from sandcrew.e2b._errors import json_error, not_implemented
from sandcrew.e2b._plane import PlaneHandler, WatchedStream, guarded
from sandcrew.e2b._sandboxes import WORKDIR, HostedSandbox, SandboxRegistry
from sandcrew.errors import SessionFileError, SessionFileNotFoundError
from sandcrew.sandbox import (
    CommandResult,
    FileEntry,
    OutputEvent,
    RunningCommand,
    SessionClosedError,
)

USER = "user"
MAX_LIST_DEPTH = 8
MAX_MESSAGE_BYTES = 1 << 20
"""Largest Connect request message: a command line and its environment."""

FILE_TYPES = {
    "file": "FILE_TYPE_FILE",
    "folder": "FILE_TYPE_DIRECTORY",
    "link": "FILE_TYPE_SYMLINK",
}
SIGNALS = {"SIGNAL_SIGKILL": signal.SIGKILL, "SIGNAL_SIGTERM": signal.SIGTERM}

Unary = Callable[[HostedSandbox, dict[str, Any]], Awaitable[dict[str, Any]]]


class Envd:
    """envd's routes, over one :class:`SandboxRegistry`."""

    def __init__(self, registry: SandboxRegistry, *, max_file_bytes: int) -> None:
        self._registry = registry
        self._max_file_bytes = max_file_bytes
        self._unary: dict[str, Unary] = {
            "filesystem.Filesystem/Stat": self._stat,
            "filesystem.Filesystem/ListDir": self._list_dir,
            "filesystem.Filesystem/MakeDir": self._make_dir,
            "filesystem.Filesystem/Move": self._move,
            "filesystem.Filesystem/Remove": self._remove,
            "process.Process/SendSignal": self._send_signal,
        }

    def routes(self) -> list[Route]:
        return [
            Route("/health", self._guarded(self._health), methods=["GET"]),
            Route("/files", self._guarded(self._read_file), methods=["GET"]),
            Route("/files", self._guarded(self._write_files), methods=["POST"]),
            Route("/filesystem.Filesystem/{method}", self._guarded(self._rpc), methods=["POST"]),
            Route("/process.Process/{method}", self._guarded(self._rpc), methods=["POST"]),
        ]

    def _guarded(
        self, handler: PlaneHandler
    ) -> Callable[[Request], Awaitable[Response | WatchedStream]]:
        """``handler`` for the sandbox the request names (its token checked), its refusals
        answered as envd answers them (JSON)."""
        return guarded(self._registry, json_error, handler)

    async def _health(self, request: Request, hosted: HostedSandbox) -> Response:
        """204 while the sandbox runs; a sandbox that is gone is "not found" (502)."""
        return Response(status_code=204)

    # -- /files ---------------------------------------------------------------------------

    async def _read_file(self, request: Request, hosted: HostedSandbox) -> Response:
        path = request.query_params.get("path")
        if not path:
            return json_error(400, "the path parameter is required")
        try:
            data = await hosted.session.get_file(path, max_bytes=self._max_file_bytes)
        except (UserError, SessionClosedError) as error:
            return json_error(*_file_status(error))
        return Response(data, media_type="application/octet-stream")

    async def _write_files(self, request: Request, hosted: HostedSandbox) -> Response:
        try:
            files = await self._uploaded(request)
            written = []
            for path, data in files:
                await hosted.session.put_file(path, data)
                written.append(
                    {"name": posixpath.basename(path), "type": "file", "path": _absolute(path)}
                )
        except (UserError, SessionClosedError) as error:
            return json_error(*_file_status(error))
        return JSONResponse(written)

    async def _uploaded(self, request: Request) -> list[tuple[str, bytes]]:
        """The files of an upload: multipart (``file`` fields, the name the path) or one
        octet-stream body (the ``path`` parameter)."""
        path = request.query_params.get("path")
        content_type = request.headers.get("content-type", "")
        if content_type.startswith("multipart/form-data"):
            form = await request.form(max_files=1000, max_fields=1000)
            fields = [item for key, item in form.multi_items() if key == "file"]
            if not fields:
                raise UserError("the upload holds no 'file' field")
            files = []
            for item in fields:
                if not isinstance(item, UploadFile):
                    raise UserError("each 'file' field must be a file")
                name = path if path and len(fields) == 1 else item.filename
                if not name:
                    raise UserError("a file of the upload has no path")
                files.append((name, await item.read()))
            return files
        if not path:
            raise UserError("the path parameter is required")
        body = await request.body()
        if request.headers.get("content-encoding") == "gzip":
            body = _gunzipped(body, self._max_file_bytes)
        return [(path, body)]

    # -- Connect calls --------------------------------------------------------------------

    async def _rpc(self, request: Request, hosted: HostedSandbox) -> Response | WatchedStream:
        service = request.url.path.strip("/").split("/")[0]
        name = f"{service}/{request.path_params['method']}"
        streaming = request.headers.get("content-type", "").startswith("application/connect+")
        if name == "process.Process/Start":
            return await self._start(request, hosted)
        handler = self._unary.get(name)
        try:
            if handler is None or streaming:
                raise ConnectError(Code.UNIMPLEMENTED, not_implemented(f"envd's {name}"))
            message = json_object(await request.body())
            answer = await handler(hosted, message)
        except ConnectError as error:
            return _unary_error(error)
        except (UserError, SessionClosedError) as error:
            return _unary_error(_connect_error(error))
        return JSONResponse(answer, media_type=UNARY_CONTENT_TYPE)

    async def _stat(self, hosted: HostedSandbox, message: dict[str, Any]) -> dict[str, Any]:
        path = string_field(message, "path")
        return {"entry": entry_info(await _entry(hosted, path), _absolute(path))}

    async def _list_dir(self, hosted: HostedSandbox, message: dict[str, Any]) -> dict[str, Any]:
        path = string_field(message, "path")
        depth = message.get("depth", 1)
        if not isinstance(depth, int) or depth < 0:
            raise ConnectError(Code.INVALID_ARGUMENT, "depth must be a whole number")
        depth = min(max(depth, 1), MAX_LIST_DEPTH)
        entry = await _entry(hosted, path)
        if entry.kind != "folder":
            raise ConnectError(Code.INVALID_ARGUMENT, f"{path} is not a folder")
        entries: list[dict[str, Any]] = []
        await self._walk(hosted, _absolute(path), depth, entries)
        return {"entries": entries}

    async def _walk(
        self, hosted: HostedSandbox, folder: str, depth: int, into: list[dict[str, Any]]
    ) -> None:
        for entry in await hosted.session.list_files(folder):
            path = f"{folder.rstrip('/')}/{entry.name}"
            into.append(entry_info(entry, path))
            if entry.kind == "folder" and depth > 1:
                await self._walk(hosted, path, depth - 1, into)

    async def _make_dir(self, hosted: HostedSandbox, message: dict[str, Any]) -> dict[str, Any]:
        path = string_field(message, "path")
        if not await hosted.session.make_dir(path):
            raise ConnectError(Code.ALREADY_EXISTS, f"{path} already exists")
        return await self._stat(hosted, message)

    async def _move(self, hosted: HostedSandbox, message: dict[str, Any]) -> dict[str, Any]:
        source = string_field(message, "source")
        destination = string_field(message, "destination")
        await hosted.session.rename_file(source, destination)
        return await self._stat(hosted, {"path": destination})

    async def _remove(self, hosted: HostedSandbox, message: dict[str, Any]) -> dict[str, Any]:
        path = string_field(message, "path")
        if await hosted.session.stat_file(path) is None:
            raise ConnectError(Code.NOT_FOUND, f"{path}: no such file or folder")
        await hosted.session.remove_file(path)
        return {}

    async def _send_signal(self, hosted: HostedSandbox, message: dict[str, Any]) -> dict[str, Any]:
        selector = message.get("process")
        pid = selector.get("pid") if isinstance(selector, dict) else None
        if not isinstance(pid, int):
            raise ConnectError(Code.INVALID_ARGUMENT, "process.pid is required")
        number = SIGNALS.get(str(message.get("signal")))
        if number is None:
            raise ConnectError(
                Code.INVALID_ARGUMENT, "signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM"
            )
        command = hosted.commands.get(pid)
        if command is None:
            raise ConnectError(Code.NOT_FOUND, f"process with pid {pid} not found")
        await command.kill(number)
        return {}

    async def _start(self, request: Request, hosted: HostedSandbox) -> WatchedStream | Response:
        try:
            message = first_message(await request.body(), max_bytes=MAX_MESSAGE_BYTES)
            config = message.get("process")
            if not isinstance(config, dict):
                raise ConnectError(Code.INVALID_ARGUMENT, "process is required")
            if message.get("pty"):
                raise ConnectError(Code.UNIMPLEMENTED, not_implemented("a PTY"))
            if message.get("stdin"):
                raise ConnectError(Code.UNIMPLEMENTED, not_implemented("a command's stdin"))
            command_line = command_of(config)
            envs = config.get("envs") or {}
            if not isinstance(envs, dict) or not all(
                isinstance(key, str) and isinstance(value, str) for key, value in envs.items()
            ):
                raise ConnectError(Code.INVALID_ARGUMENT, "envs must map strings to strings")
            cwd = config.get("cwd") or None
            if cwd is not None and not isinstance(cwd, str):
                raise ConnectError(Code.INVALID_ARGUMENT, "cwd must be a string")
            limit = timeout_seconds(request.headers.get("connect-timeout-ms"))
            limit = min(limit or hosted.remaining(), max(hosted.remaining(), 1.0))
            running = await hosted.session.start_command(
                command_line, env={**hosted.env_vars, **envs}, cwd=cwd, timeout=limit
            )
        except ConnectError as error:
            return _stream_error(error)
        except (UserError, SessionClosedError) as error:
            return _stream_error(_connect_error(error))
        pid = next(hosted.pids)
        hosted.commands[pid] = running

        async def kill() -> None:
            if pid in hosted.commands:
                await running.kill()

        return WatchedStream(
            _command_stream(hosted, pid, running), media_type=STREAM_CONTENT_TYPE, on_gone=kill
        )


async def _entry(hosted: HostedSandbox, path: str) -> FileEntry:
    """The entry at ``path``; the work folder itself is a folder (the session describes
    what is in it, not the folder)."""
    if _absolute(path) == WORKDIR:
        return FileEntry(name=posixpath.basename(WORKDIR), kind="folder", size=0, mode=0o755)
    entry = await hosted.session.stat_file(path)
    if entry is None:
        raise ConnectError(Code.NOT_FOUND, f"{path}: no such file or folder")
    return entry


def command_of(config: dict[str, Any]) -> str:
    """The shell command of a ``ProcessConfig``: the SDK's ``bash -l -c CMD`` as CMD, else
    the program and its arguments quoted."""
    cmd, args = config.get("cmd"), config.get("args") or []
    if not isinstance(cmd, str) or not cmd:
        raise ConnectError(Code.INVALID_ARGUMENT, "process.cmd is required")
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise ConnectError(Code.INVALID_ARGUMENT, "process.args must be strings")
    if cmd in ("/bin/bash", "bash") and len(args) == 3 and args[:2] == ["-l", "-c"]:
        return str(args[2])
    return shlex.join([cmd, *args])


async def _command_stream(
    hosted: HostedSandbox, pid: int, running: RunningCommand
) -> AsyncGenerator[bytes]:
    yield envelope({"event": {"start": {"pid": pid}}})
    error: ConnectError | None = None
    try:
        async for event in running.events():
            if isinstance(event, OutputEvent):
                data = base64.b64encode(event.text.encode()).decode()
                yield envelope({"event": {"data": {event.stream: data}}})
            elif isinstance(event, CommandResult):
                if event.timed_out:
                    error = ConnectError(
                        Code.DEADLINE_EXCEEDED, "the command ran past its timeout and was killed"
                    )
                else:
                    yield envelope({"event": {"end": end_event(event)}})
    except SessionClosedError as ended:
        error = ConnectError(Code.UNAVAILABLE, f"the sandbox ended: {ended}")
    finally:
        hosted.commands.pop(pid, None)
    yield end_of_stream(error)


def end_event(result: CommandResult) -> dict[str, Any]:
    """A command's result as envd's ``EndEvent``."""
    if result.signal is not None:
        status = f"signal: {signal.Signals(result.signal).name.removeprefix('SIG').lower()}"
    else:
        status = f"exit status {result.exit_code}"
    end: dict[str, Any] = {
        "exitCode": result.exit_code,
        "exited": result.signal is None,
        "status": status,
    }
    if result.error:
        end["error"] = result.error
    return end


def entry_info(entry: FileEntry, path: str) -> dict[str, Any]:
    """A file entry as envd's ``EntryInfo`` (proto3 JSON)."""
    mode = entry.mode or 0
    kind_bits = {"folder": stat.S_IFDIR, "link": stat.S_IFLNK}.get(entry.kind, stat.S_IFREG)
    info: dict[str, Any] = {
        "name": posixpath.basename(path) or entry.name,
        "type": FILE_TYPES.get(entry.kind, "FILE_TYPE_UNSPECIFIED"),
        "path": path,
        "size": str(entry.size),
        "mode": mode,
        "permissions": stat.filemode(kind_bits | mode),
        "owner": USER,
        "group": USER,
    }
    if entry.modified is not None:
        info["modifiedTime"] = (
            datetime.fromtimestamp(entry.modified, UTC).isoformat().replace("+00:00", "Z")
        )
    if entry.kind == "link":
        info["isSymlink"] = True
    return info


def _absolute(path: str) -> str:
    if path.startswith("/"):
        return posixpath.normpath(path)
    return posixpath.normpath(f"{WORKDIR}/{path}")


def _file_status(error: BaseException) -> tuple[int, str]:
    if isinstance(error, SessionFileNotFoundError):
        return 404, str(error)
    if isinstance(error, SessionClosedError):
        return 502, f"The sandbox was not found: {error}"
    return 400, str(error)


def _connect_error(error: BaseException) -> ConnectError:
    if isinstance(error, SessionFileNotFoundError):
        return ConnectError(Code.NOT_FOUND, str(error))
    if isinstance(error, SessionClosedError):
        return ConnectError(Code.UNAVAILABLE, f"The sandbox was not found: {error}")
    if isinstance(error, SessionFileError):
        return ConnectError(Code.INVALID_ARGUMENT, str(error))
    return ConnectError(Code.INVALID_ARGUMENT, str(error))


def _unary_error(error: ConnectError) -> Response:
    return JSONResponse(
        error.as_json(), status_code=HTTP_STATUS[error.code], media_type=UNARY_CONTENT_TYPE
    )


def _stream_error(error: ConnectError) -> Response:
    return Response(end_of_stream(error), media_type=STREAM_CONTENT_TYPE)


def _gunzipped(body: bytes, limit: int) -> bytes:
    inflater = zlib.decompressobj(wbits=31)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error:
        raise UserError("the gzip body is not valid gzip") from None
    if len(data) > limit:
        raise UserError(f"the file is larger than the server accepts ({limit} bytes)")
    return data
