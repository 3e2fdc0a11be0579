"""Saving a run's files on the host, where every name below the folder is the program's choice.

The folder is the user's (``--out DIR``: a link there is theirs and is followed); the
names under it come from an untrusted program, so saving

- never follows a link below the folder: each part of a name is opened relative to
  its parent (``openat``) with ``O_NOFOLLOW``, so an existing ``sub -> ../victim`` is
  refused, not entered;
- never replaces or reuses a file: each file is created with ``O_EXCL``;
- writes only into a folder sandcrew made for the purpose (:func:`save_artifacts`): the
  folder named when it is new or empty, else a fresh ``sandcrew-<time>`` folder inside
  it, so a name cannot add a file among the user's own (a ``.bashrc`` in the home
  folder, a hook under ``.git/hooks``);
- refuses names with a version-control folder (``.git``, ``.hg``...) in them: tools
  that run in every folder (a shell prompt's ``git status``) run commands that such a
  folder's configuration names.

A file that cannot be saved is left out with a note; its bytes stay in the result.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..core import UserError
from ._result import ExecutionResult

_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_MODE = 0o644
_FOLDER_MODE = 0o755
TOOL_FOLDERS = frozenset({".git", ".hg", ".svn", ".bzr", ".jj", "_darcs"})
"""Folders whose contents tools read and act on; never created from a program's names."""

FileIdentity = tuple[int, int]
"""``(st_dev, st_ino)`` of a file this save wrote."""


class SaveRefused(UserError):
    """A file cannot be saved under the folder; the message says why."""


def refused_name(name: str) -> str | None:
    """Why ``name`` may not be saved on the host, or None if it may."""
    parts = name.split("/")
    if name.startswith("/") or any(part in ("", ".", "..") or "\x00" in part for part in parts):
        return "not a plain relative name"
    for part in parts:
        if part.rstrip(". ").casefold() in TOOL_FOLDERS:
            return f"{part!r} is a version-control folder"
    return None


def write_new_file(
    folder: int, name: str, data: bytes, *, replaceable: frozenset[FileIdentity] = frozenset()
) -> FileIdentity:
    """Create ``name`` (``/``-separated) under the open folder ``folder``, walking part by part.

    Missing subfolders are made; no link is followed and no existing file is replaced,
    except one whose identity is in ``replaceable`` (a file this same save wrote).
    """
    reason = refused_name(name)
    if reason is not None:
        raise SaveRefused(reason)
    *subfolders, filename = name.split("/")
    opened: list[int] = []
    current = folder
    try:
        for depth, part in enumerate(subfolders, start=1):
            with _explained("/".join(subfolders[:depth]), current, part):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, _FOLDER_MODE, dir_fd=current)
                current = os.open(part, _FOLDER_FLAGS, dir_fd=current)
            opened.append(current)
        with _explained(name, current, filename):
            try:
                handle = os.open(filename, _NEW_FILE_FLAGS, _FILE_MODE, dir_fd=current)
            except FileExistsError:
                found = os.stat(filename, dir_fd=current, follow_symlinks=False)
                ours = (found.st_dev, found.st_ino) in replaceable
                if not (ours and stat.S_ISREG(found.st_mode)):
                    raise
                os.unlink(filename, dir_fd=current)
                handle = os.open(filename, _NEW_FILE_FLAGS, _FILE_MODE, dir_fd=current)
            with os.fdopen(handle, "wb") as file:
                file.write(data)
                written = os.fstat(file.fileno())
        return written.st_dev, written.st_ino
    finally:
        for descriptor in opened:
            os.close(descriptor)


@contextlib.contextmanager
def _explained(shown: str, folder: int, part: str) -> Iterator[None]:
    """Turn an ``OSError`` on ``part`` of ``folder`` into a :class:`SaveRefused` saying why."""
    try:
        yield
    except OSError as error:
        try:
            found = os.stat(part, dir_fd=folder, follow_symlinks=False).st_mode
        except OSError:
            found = None
        if found is not None and stat.S_ISLNK(found):
            why = "it is a link (links are never followed)"
        elif error.errno == errno.EEXIST:
            why = "something of that name is already there"
        elif found is not None and not stat.S_ISDIR(found):
            why = "it is a file, not a folder"
        else:
            why = error.strerror or str(error)
        raise SaveRefused(f"{shown}: {why}") from None


def open_folder(folder: Path) -> int:
    """Open ``folder`` (made with its parents if missing) as a directory descriptor."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileExistsError:
        raise UserError(f"{folder} is not a folder") from None
    except OSError as error:
        raise UserError(f"cannot use the folder {folder}: {error.strerror}") from None


def _fresh_folder(requested: Path) -> tuple[int, Path]:
    """The folder to save into: ``requested`` if new or empty, else a new one inside it."""
    try:
        requested.mkdir(parents=True)
    except FileExistsError:
        pass
    except OSError as error:
        raise UserError(f"cannot create the folder {requested}: {error.strerror}") from None
    descriptor = open_folder(requested)
    if not os.listdir(descriptor):
        return descriptor, requested
    try:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        for attempt in range(1, 1000):
            name = f"sandcrew-{stamp}" if attempt == 1 else f"sandcrew-{stamp}-{attempt}"
            try:
                os.mkdir(name, _FOLDER_MODE, dir_fd=descriptor)
            except FileExistsError:
                continue
            except OSError as error:
                why = error.strerror
                raise UserError(f"cannot create a folder in {requested}: {why}") from None
            return os.open(name, _FOLDER_FLAGS, dir_fd=descriptor), requested / name
        raise UserError(f"cannot create a new folder in {requested}: too many sandcrew-{stamp}*")
    finally:
        os.close(descriptor)


def save_artifacts(
    results: Sequence[ExecutionResult], folder: Path
) -> tuple[list[ExecutionResult], Path | None]:
    """Save the runs' files under ``folder``: the results that know their paths, and where.

    ``folder`` is used when it is new or empty; otherwise the files go into a fresh
    ``sandcrew-<UTC time>`` folder inside it, which is returned (None: nothing to save).
    Runs save in order, and a later run's file replaces an earlier run's file of that
    name (only a file this save wrote). A file that cannot be saved keeps no path and
    gets a note in ``artifacts_skipped``.
    """
    if not any(result.artifacts for result in results):
        return list(results), None
    descriptor, chosen = _fresh_folder(folder)
    written: dict[str, FileIdentity] = {}
    saved_results: list[ExecutionResult] = []
    try:
        for result in results:
            saved, notes = [], list(result.artifacts_skipped)
            for artifact in result.artifacts:
                earlier = written.get(artifact.name)
                own = frozenset() if earlier is None else frozenset({earlier})
                try:
                    written[artifact.name] = write_new_file(
                        descriptor, artifact.name, artifact.data, replaceable=own
                    )
                except SaveRefused as refusal:
                    notes.append(f"{artifact.name}: not saved on the host: {refusal}")
                    saved.append(artifact)
                    continue
                saved.append(artifact.model_copy(update={"path": str(chosen / artifact.name)}))
            saved_results.append(
                result.model_copy(
                    update={"artifacts": tuple(saved), "artifacts_skipped": tuple(notes)}
                )
            )
    finally:
        os.close(descriptor)
    return saved_results, chosen
