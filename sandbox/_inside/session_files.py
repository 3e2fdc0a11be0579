"""The work dir's files for the session supervisor, never through a link.

Operations (a request's ``op``): ``put``, ``get``, ``list``, ``stat``, ``remove``,
``rename`` and ``mkdir``; paths are relative to the work dir.

Run by a helper process the supervisor forks and drops to the session's uid, so
a request can do no more than the code in the session could; every folder on
the way is opened with ``O_NOFOLLOW`` relative to the one before it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from typing import Any

from .framing import write_all

_CHUNK = 64 * 1024
_LISTING_LIMIT = 10_000
_NAME_LIMIT = 4096


def checked_parts(name: str) -> list[str]:
    """The parts of a relative, ``/``-separated name; ``.`` or ``""`` is the work dir itself."""
    if name in ("", "."):
        return []
    parts = name.split("/")
    if (
        name.startswith("/")
        or len(name) > _NAME_LIMIT
        or any(part in ("", ".", "..") or "\x00" in part for part in parts)
    ):
        raise ValueError(f"refused file name {name!r}")
    return parts


def _open_folder(workdir: str, parts: list[str], *, create: bool) -> int:
    """A descriptor of the folder ``parts`` under the work dir, never through a link."""
    folder = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    for part in parts:
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=folder)
        try:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
        except OSError as error:
            os.close(folder)
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                raise ValueError(f"{part!r} is not a folder (links are not followed)") from None
            raise
        os.close(folder)
        folder = inner
    return folder


def file_request(workdir: str, meta: dict[str, Any], data: bytes, max_file_bytes: int) -> bytes:
    """Answer one file request: a JSON line, then the file's bytes for ``get``."""
    operation = meta.get("op")
    path = meta.get("path")
    if not isinstance(path, str):
        raise ValueError("a path is needed")
    parts = checked_parts(path)
    if operation == "list":
        return _answer({"entries": _listing(workdir, parts)})
    if not parts:
        raise ValueError("a file name is needed (not the work folder itself)")
    if operation == "mkdir":
        folder = _open_folder(workdir, parts[:-1], create=True)
        try:
            try:
                os.mkdir(parts[-1], 0o755, dir_fd=folder)
            except FileExistsError:
                return _answer({"made": False})
            return _answer({"made": True})
        finally:
            os.close(folder)
    folder = _open_folder(workdir, parts[:-1], create=operation == "put")
    try:
        if operation == "put":
            _put(folder, parts[-1], path, data)
            return _answer({"size": len(data)})
        if operation == "get":
            limit = meta.get("max_bytes")
            limit = min(limit, max_file_bytes) if isinstance(limit, int) else max_file_bytes
            content = _get(folder, parts[-1], path, max(limit, 0))
            return _answer({"size": len(content)}) + content
        if operation == "stat":
            return _answer({"entry": _entry(folder, parts[-1])})
        if operation == "remove":
            _remove(folder, parts[-1], path)
            return _answer({})
        if operation == "rename":
            target = meta.get("target")
            if not isinstance(target, str):
                raise ValueError("a target is needed")
            target_parts = checked_parts(target)
            if not target_parts:
                raise ValueError("the target cannot be the work folder itself")
            destination = _open_folder(workdir, target_parts[:-1], create=True)
            try:
                os.rename(parts[-1], target_parts[-1], src_dir_fd=folder, dst_dir_fd=destination)
            finally:
                os.close(destination)
            return _answer({})
        raise ValueError(f"unknown file operation {operation!r}")
    finally:
        os.close(folder)


def _answer(answer: dict[str, Any]) -> bytes:
    return json.dumps(answer).encode() + b"\n"


def _put(folder: int, name: str, path: str, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    try:
        handle = os.open(name, flags, 0o644, dir_fd=folder)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ValueError(f"{path!r} is a link; links are not followed") from None
        raise
    try:
        write_all(handle, data)
    finally:
        os.close(handle)


def _get(folder: int, name: str, path: str, limit: int) -> bytes:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
    try:
        handle = os.open(name, flags, dir_fd=folder)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ValueError(f"{path!r} is a link; links are not followed") from None
        raise
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path!r} is not a regular file")
        if info.st_size > limit:
            raise ValueError(f"{path!r} has {info.st_size} bytes, more than the {limit} allowed")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(handle, _CHUNK)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise ValueError(f"{path!r} grew past the {limit} bytes allowed")
    finally:
        os.close(handle)
    return b"".join(chunks)


def _remove(folder: int, name: str, path: str) -> None:
    """A file, a link (not what it points to) or a folder with everything in it."""
    try:
        os.unlink(name, dir_fd=folder)
        return
    except IsADirectoryError:
        pass
    except PermissionError:
        # unlink of a folder is EISDIR on Linux; EPERM elsewhere: try it as a folder.
        if not stat.S_ISDIR(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
            raise
    inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
    try:
        for entry in os.listdir(inner):
            _remove(inner, entry, f"{path}/{entry}")
    finally:
        os.close(inner)
    os.rmdir(name, dir_fd=folder)


def _entry(folder: int, name: str) -> dict[str, Any] | None:
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return _describe(name, info)


def _describe(name: str, info: os.stat_result) -> dict[str, Any]:
    if stat.S_ISLNK(info.st_mode):
        kind = "link"
    elif stat.S_ISDIR(info.st_mode):
        kind = "folder"
    elif stat.S_ISREG(info.st_mode):
        kind = "file"
    else:
        kind = "other"
    shown = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return {
        "name": shown,
        "kind": kind,
        "size": info.st_size,
        "mode": stat.S_IMODE(info.st_mode),
        "modified": info.st_mtime,
    }


def _listing(workdir: str, parts: list[str]) -> list[dict[str, Any]]:
    folder = _open_folder(workdir, parts, create=False)
    entries: list[dict[str, Any]] = []
    try:
        for name in sorted(os.listdir(folder))[:_LISTING_LIMIT]:
            try:
                info = os.stat(name, dir_fd=folder, follow_symlinks=False)
            except OSError:
                continue
            entries.append(_describe(name, info))
    finally:
        os.close(folder)
    return entries
