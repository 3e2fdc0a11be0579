"""Input files in, artifacts out: the work dir's files, never following a link.

Input files travel after the program on the supervisor's stdin, packed by
:func:`pack_files` on the host; the supervisor's child unpacks them
(:func:`unpack_files`) as root with the run's gid before the program starts, so
they are root's, mode 0444. Artifacts are what the program left in
:data:`OUTPUT_FOLDER`; a child that dropped to the run uid collects them
(:func:`collect_artifacts`) once every process of the program is gone: regular
files only, never through a link, within caps and a time bound.
"""

import errno
import os
import stat
import time

from .framing import write_all

OUTPUT_FOLDER = "out"
"""The folder of the work dir whose files come back as artifacts."""

ARTIFACT_COLLECTION_SECONDS = 2.0
"""Seconds the supervisor spends at most on collecting ``out/`` once the program ended."""

_NESTING_LIMIT = 8
_SKIPPED_SHOWN = 20


def pack_files(files: dict[str, bytes]) -> bytes:
    """The input files as the supervisor reads them: name and data lengths, name, data."""
    parts: list[bytes] = []
    for name, data in files.items():
        encoded = name.encode()
        parts.append(len(encoded).to_bytes(4, "big") + len(data).to_bytes(8, "big"))
        parts.append(encoded)
        parts.append(data)
    return b"".join(parts)


def checked_name(name: str) -> list[str]:
    """The parts of a relative input file name; ValueError for anything that could leave."""
    parts = name.split("/")
    if (
        not name
        or name.startswith("/")
        or any(part in ("", ".", "..") or "\x00" in part for part in parts)
    ):
        raise ValueError("refused input file name " + repr(name))
    return parts


def unpacked(blob: bytes | memoryview) -> list[tuple[str, memoryview]]:
    """The (name, data) pairs of a :func:`pack_files` blob; ValueError if it is cut or bad."""
    view = memoryview(blob)
    found: list[tuple[str, memoryview]] = []
    position = 0
    while position < len(view):
        if position + 12 > len(view):
            raise ValueError("the input files are cut short")
        name_size = int.from_bytes(view[position : position + 4], "big")
        data_size = int.from_bytes(view[position + 4 : position + 12], "big")
        position += 12
        if position + name_size + data_size > len(view):
            raise ValueError("the input files are cut short")
        name = bytes(view[position : position + name_size]).decode("utf-8")
        position += name_size
        checked_name(name)
        found.append((name, view[position : position + data_size]))
        position += data_size
    return found


def unpack_files(blob: bytes | memoryview, workdir: str) -> None:
    """Write the input files under ``workdir``: new files only, mode 0444, no link followed."""
    for name, data in unpacked(blob):
        folder = workdir
        for part in checked_name(name)[:-1]:
            folder = os.path.join(folder, part)
            try:
                os.mkdir(folder, 0o755)
            except FileExistsError:
                pass
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        handle = os.open(os.path.join(workdir, name), flags, 0o444)
        try:
            write_all(handle, bytes(data))
        finally:
            os.close(handle)


# JSON's escapes for the characters a JSON string may not hold as they are.
_JSON_ESCAPES = {
    **{code: f"\\u{code:04x}" for code in (*range(32), 127)},
    ord('"'): '\\"',
    ord("\\"): "\\\\",
}


def json_text(value: object) -> str:
    """``value`` (str, int, bool, list, dict of those) as JSON that ``json.loads`` reads back.

    The listing's own encoder: the ``json`` module (with the ``re`` it imports) would cost
    every run's container more CPU time than the whole collection of an empty ``out/``.
    A lone surrogate (an undecodable byte of a file name) becomes its ``\\udcXX`` escape.
    """
    if isinstance(value, str):
        escaped = value.translate(_JSON_ESCAPES)
        return '"' + escaped.encode("utf-8", "backslashreplace").decode("utf-8") + '"'
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, list):
        return "[" + ", ".join(json_text(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(json_text(k) + ": " + json_text(v) for k, v in value.items()) + "}"
    raise TypeError("no JSON form for " + type(value).__name__)


def shown_name(name: str) -> str:
    """A file name as it may be shown: undecodable bytes replaced."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


class _Collection:
    """What :func:`collect_artifacts` found so far."""

    def __init__(self, limit_bytes: int, limit_count: int, give_up: float) -> None:
        self.limit_bytes, self.limit_count, self.give_up = limit_bytes, limit_count, give_up
        self.found: list[dict[str, object]] = []
        self.contents: list[bytes] = []
        self.skipped: list[str] = []
        self.total = 0
        self.truncated = False
        self.late = False

    def skip(self, name: str, reason: str) -> None:
        if len(self.skipped) < _SKIPPED_SHOWN:
            self.skipped.append(shown_name(name) + ": " + reason)

    def walk(self, folder: int, prefix: str, depth: int) -> None:
        for name in sorted(os.listdir(folder)):
            path = prefix + name
            if self.late or time.monotonic() > self.give_up:
                if not self.late:
                    self.skip(path, "not collected in time, nor what follows it")
                self.late = self.truncated = True
                return
            try:
                path.encode("utf-8")
            except UnicodeEncodeError:
                self.skip(path, "the name is not UTF-8")
                continue
            if any(ord(character) < 32 or ord(character) == 127 for character in name):
                self.skip(repr(path), "control characters in the name")
                continue
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
            try:
                handle = os.open(name, flags, dir_fd=folder)
            except OSError as error:
                reason = "a symbolic link" if error.errno == errno.ELOOP else str(error.strerror)
                self.skip(path, reason)
                continue
            try:
                self.take(handle, path, depth)
            finally:
                os.close(handle)

    def take(self, handle: int, path: str, depth: int) -> None:
        info = os.fstat(handle)
        if stat.S_ISDIR(info.st_mode):
            if depth < _NESTING_LIMIT:
                self.walk(handle, path + "/", depth + 1)
            else:
                self.skip(path, "nested too deep")
            return
        if not stat.S_ISREG(info.st_mode):
            self.skip(path, "not a regular file")
            return
        if len(self.found) >= self.limit_count or self.total + info.st_size > self.limit_bytes:
            self.truncated = True
            self.skip(path, "over the artifact limits")
            return
        chunks: list[bytes] = []
        size = 0
        while size < info.st_size:
            chunk = os.read(handle, min(1 << 20, info.st_size - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        self.found.append({"name": path, "size": size})
        self.contents.append(b"".join(chunks))
        self.total += size


def collect_artifacts(workdir: str, limit_bytes: int, limit_count: int, give_up: float) -> bytes:
    """The artifacts listing (a JSON line: files, skipped, truncated) then the files' bytes.

    Regular files under ``workdir/out`` only, in name order, up to ``limit_count``
    files and ``limit_bytes`` in all; past ``give_up`` (a ``time.monotonic()``)
    the rest is left out and the listing says so.
    """
    collection = _Collection(limit_bytes, limit_count, give_up)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        top = os.open(os.path.join(workdir, OUTPUT_FOLDER), flags)
    except OSError as error:
        if error.errno != errno.ENOENT:
            collection.skip(OUTPUT_FOLDER, "not a folder")
    else:
        try:
            collection.walk(top, "", 0)
        finally:
            os.close(top)
    listing = {
        "files": collection.found,
        "skipped": collection.skipped,
        "truncated": collection.truncated,
    }
    return json_text(listing).encode() + b"\n" + b"".join(collection.contents)
