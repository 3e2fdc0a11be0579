"""The work dir's files for the session supervisor: put, get and list, never through a link.

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


def file_request(workdir: str, kind: str, name: str, data: bytes, limit: int) -> bytes:
    """Answer one file request: a JSON line, then the file's bytes for ``get``."""
    parts = checked_parts(name)
    if kind == "list":
        return json.dumps({"entries": _listing(workdir, parts)}).encode() + b"\n"
    if not parts:
        raise ValueError("a file name is needed")
    folder = _open_folder(workdir, parts[:-1], create=kind == "put")
    try:
        if kind == "put":
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
            try:
                handle = os.open(parts[-1], flags, 0o644, dir_fd=folder)
            except OSError as error:
                if error.errno == errno.ELOOP:
                    raise ValueError(f"{name!r} is a link; links are not followed") from None
                raise
            try:
                write_all(handle, data)
            finally:
                os.close(handle)
            return json.dumps({"size": len(data)}).encode() + b"\n"
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
        try:
            handle = os.open(parts[-1], flags, dir_fd=folder)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise ValueError(f"{name!r} is a link; links are not followed") from None
            raise
        try:
            info = os.fstat(handle)
            if not stat.S_ISREG(info.st_mode):
                raise ValueError(f"{name!r} is not a regular file")
            if info.st_size > limit:
                raise ValueError(
                    f"{name!r} has {info.st_size} bytes, more than the {limit} allowed"
                )
            chunks: list[bytes] = []
            size = 0
            while size <= limit:
                chunk = os.read(handle, _CHUNK)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > limit:
                raise ValueError(f"{name!r} grew past the {limit} bytes allowed")
        finally:
            os.close(handle)
        return json.dumps({"size": size}).encode() + b"\n" + b"".join(chunks)
    finally:
        os.close(folder)


def _listing(workdir: str, parts: list[str]) -> list[dict[str, Any]]:
    folder = _open_folder(workdir, parts, create=False)
    entries: list[dict[str, Any]] = []
    try:
        for name in sorted(os.listdir(folder))[:_LISTING_LIMIT]:
            try:
                info = os.stat(name, dir_fd=folder, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode):
                kind = "link"
            elif stat.S_ISDIR(info.st_mode):
                kind = "folder"
            elif stat.S_ISREG(info.st_mode):
                kind = "file"
            else:
                kind = "other"
            shown = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            entries.append({"name": shown, "kind": kind, "size": info.st_size})
    finally:
        os.close(folder)
    return entries
