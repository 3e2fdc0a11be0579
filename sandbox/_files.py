"""Input files for a run, and the artifacts a run leaves in its output folder.

Input files travel in the supervisor's stdin payload and are written into the
work dir before the program starts, owned by root with mode 0444: the program
can read them but neither write them nor change their mode (it may delete or
replace them, and create files of its own beside them). Artifacts are
what the program leaves in ``<workdir>/out``: the supervisor collects them as
the run's uid after every process of the program is gone, never following a
link and taking regular files only, and frames them on stdout behind its nonce,
so a program cannot forge them.
"""

from __future__ import annotations

import base64
import json
import mimetypes
import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ..core import NotARegularFile, UserError, read_regular_file
from ._inside.files import OUTPUT_FOLDER
from ._languages import RUNNERS

_NAME_BYTES_LIMIT = 255
_RESERVED_NAMES = frozenset({OUTPUT_FOLDER, *(runner.filename for runner in RUNNERS.values())})


class Artifact(BaseModel):
    """One file the program wrote into its output folder."""

    model_config = ConfigDict(frozen=True)

    name: str
    """Path relative to the output folder, ``/``-separated."""
    size: int
    media_type: str
    data: bytes = Field(default=b"", repr=False, exclude=True)
    """The file's bytes (not part of ``model_dump``; see :meth:`data_base64`)."""
    path: str | None = None
    """Where it was saved on the host, once saved."""

    def data_base64(self) -> str:
        return base64.b64encode(self.data).decode()

    def save(self, folder: Path) -> Artifact:
        """Write the bytes as a new file under ``folder``; the copy knows its path.

        ``folder`` is made if missing. Below it no link is followed and no existing
        file is replaced (see :func:`save_artifacts` for a folder of its own).
        """
        from ._saving import open_folder, write_new_file

        descriptor = open_folder(folder)
        try:
            write_new_file(descriptor, self.name, self.data)
        except UserError as error:
            raise UserError(f"cannot save {self.name} under {folder}: {error}") from None
        finally:
            os.close(descriptor)
        return self.model_copy(update={"path": str(folder.joinpath(*self.name.split("/")))})


def media_type_of(name: str) -> str:
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return guessed or "application/octet-stream"


def check_work_dir_name(name: str) -> str:
    """The name of a file or folder of a work dir, if relative, ``/``-separated, without
    ``.``/``..``/NUL, at most 255 bytes."""
    parts = name.split("/")
    try:
        size = len(name.encode())
    except UnicodeEncodeError:
        raise UserError(f"file name {name!r} is not valid UTF-8") from None
    if (
        not name
        or name.startswith("/")
        or size > _NAME_BYTES_LIMIT
        or any(part in ("", ".", "..") or "\x00" in part for part in parts)
    ):
        raise UserError(
            f"file name {name!r} is refused: use a relative name without '.', '..', "
            f"empty parts or NUL, at most {_NAME_BYTES_LIMIT} bytes"
        )
    return name


def check_file_name(name: str) -> str:
    """The name of a run's input file: a work dir name (:func:`check_work_dir_name`) that is
    not the program's file or ``out``, which a run reserves."""
    try:
        check_work_dir_name(name)
    except UserError as refusal:
        raise UserError(f"input {refusal}") from None
    if name.split("/")[0] in _RESERVED_NAMES:
        raise UserError(f"input file name {name!r} is reserved by the sandbox")
    return name


def load_input_files(
    files: Mapping[str, bytes | Path] | None, *, max_count: int, max_bytes: int
) -> dict[str, bytes]:
    """Read and check the input files: names, count and total size against the caps."""
    if not files:
        return {}
    if len(files) > max_count:
        raise UserError(
            f"too many input files: {len(files)} (the limit is {max_count}; "
            "raise max_input_files to allow more)"
        )
    loaded: dict[str, bytes] = {}
    total = 0
    folders: set[str] = set()
    for name, content in files.items():
        check_file_name(name)
        folders.update("/".join(name.split("/")[:depth]) for depth in range(1, name.count("/") + 1))
        if isinstance(content, Path):
            try:
                data = read_regular_file(content, max_bytes)
            except FileNotFoundError:
                raise UserError(f"input file not found: {content}") from None
            except NotARegularFile as refusal:
                raise UserError(f"input file {refusal}") from None
            except OSError as error:
                raise UserError(f"cannot read input file {content}: {error.strerror}") from None
            if len(data) > max_bytes:
                raise UserError(_too_large(f"input file {content}", max_bytes))
        else:
            data = bytes(content)
        total += len(data)
        if total > max_bytes:
            raise UserError(_too_large("the input files", max_bytes))
        loaded[name] = data
    clash = folders & loaded.keys()
    if clash:
        raise UserError(f"input file name {sorted(clash)[0]!r} is also used as a folder")
    return loaded


def parse_artifacts(
    frame: bytes, *, received_all: bool, cut: bool = False
) -> tuple[list[Artifact], bool, list[str]]:
    """The artifacts, whether some were left out, and notes on skipped files.

    ``cut``: the container was killed while the frame was being sent.
    """
    if cut:
        return [], True, ["the run was stopped while its files were being sent"]
    if not frame:
        return [], False, []
    if not received_all:
        return [], True, ["the artifacts exceeded what the host accepts"]
    listing_line, _, contents = frame.partition(b"\n")
    try:
        listing = json.loads(listing_line)
        found = listing["files"]
        skipped = [str(note) for note in listing["skipped"]]
        truncated = bool(listing["truncated"])
    except (ValueError, KeyError, TypeError):
        return [], True, ["the artifacts listing was unreadable"]
    artifacts: list[Artifact] = []
    position = 0
    for entry in found:
        name, size = str(entry["name"]), int(entry["size"])
        data = contents[position : position + size]
        position += size
        if not _safe_artifact_name(name):
            skipped.append(f"{name!r}: refused name")
            continue
        artifacts.append(Artifact(name=name, size=size, media_type=media_type_of(name), data=data))
    return artifacts, truncated, skipped


def _safe_artifact_name(name: str) -> bool:
    parts = name.split("/")
    return not name.startswith("/") and all(
        part not in ("", ".", "..") and part.isprintable() for part in parts
    )


def _too_large(what: str, limit: int) -> str:
    return (
        f"{what}: more than the input limit of {limit} bytes (raise max_input_bytes to allow more)"
    )
