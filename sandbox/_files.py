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

import json
import mimetypes
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from typing_extensions import TypedDict

from ..core import NotARegularFile, UserError, read_regular_file
from ._inline import from_base64, inline_base64
from ._inside.files import OUTPUT_FOLDER
from ._languages import RUNNERS

_NAME_BYTES_LIMIT = 255
_PATH_BYTES_LIMIT = 4096
_RESERVED_NAMES = frozenset({OUTPUT_FOLDER, *(runner.filename for runner in RUNNERS.values())})


class ArtifactJson(TypedDict):
    """An artifact as JSON documents carry it."""

    name: str
    size: int
    media_type: str
    path: str | None
    data_base64: str | None
    """Its bytes, base64, when at most :data:`~sandcrew.sandbox.INLINE_BYTES`; else null."""


class Artifact(BaseModel):
    """One file the program wrote into its output folder."""

    model_config = ConfigDict(frozen=True)

    name: str
    """Path relative to the output folder, ``/``-separated."""
    size: int
    media_type: str
    data: bytes = Field(default=b"", repr=False, exclude=True)
    """The file's bytes. Not in ``model_dump()``; in JSON (``model_dump(mode="json")``) they
    are ``data_base64``, up to :data:`~sandcrew.sandbox.INLINE_BYTES` (see :mod:`._inline`)."""
    path: str | None = None
    """Where it was saved on the host, once saved."""

    @model_serializer(mode="wrap", when_used="json")
    def _with_inline_bytes(self, handler: SerializerFunctionWrapHandler) -> ArtifactJson:
        dumped: ArtifactJson = handler(self)
        dumped["data_base64"] = inline_base64(self.data)
        return dumped

    @model_validator(mode="before")
    @classmethod
    def _bytes_from_json(cls, value: Any) -> Any:
        if isinstance(value, dict) and isinstance(value.get("data_base64"), str):
            value = {**value, "data": from_base64(value["data_base64"])}
            value.pop("data_base64")
        elif isinstance(value, dict) and "data_base64" in value:
            value = {key: item for key, item in value.items() if key != "data_base64"}
        return value

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


def check_file_name(name: str) -> str:
    """An input file's name: a relative path (see :func:`checked_path`), not a reserved one."""
    checked_path(name, what="input file name", max_bytes=_NAME_BYTES_LIMIT)
    if name.split("/")[0] in _RESERVED_NAMES:
        raise UserError(f"input file name {name!r} is reserved by the sandbox")
    return name


def checked_path(name: str, *, what: str, max_bytes: int = _PATH_BYTES_LIMIT) -> str:
    """``name`` if it is relative, ``/``-separated, without ``.``/``..``/empty parts or NUL."""
    parts = name.split("/")
    try:
        size = len(name.encode())
    except UnicodeEncodeError:
        raise UserError(f"{what} {name!r} is not valid UTF-8") from None
    if (
        not name
        or name.startswith("/")
        or size > max_bytes
        or any(part in ("", ".", "..") or "\x00" in part for part in parts)
    ):
        raise UserError(
            f"{what} {name!r} is refused: use a relative name without '.', '..', "
            f"empty parts or NUL, at most {max_bytes} bytes"
        )
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
        data = read_input_file(content, max_bytes) if isinstance(content, Path) else bytes(content)
        total += len(data)
        if total > max_bytes:
            raise UserError(_too_large("the input files", max_bytes))
        loaded[name] = data
    clash = folders & loaded.keys()
    if clash:
        raise UserError(f"input file name {sorted(clash)[0]!r} is also used as a folder")
    return loaded


def read_input_file(path: Path, limit: int, *, setting: str = "max_input_bytes") -> bytes:
    """The bytes of the host file ``path``, read to one byte past ``limit`` at most.

    A missing path, a folder, a FIFO, a device or a file over ``limit`` is a
    :class:`UserError` (``setting`` names the limit to raise); nothing larger than
    the limit is ever held.
    """
    try:
        data = read_regular_file(path, limit)
    except FileNotFoundError:
        raise UserError(f"input file not found: {path}") from None
    except NotARegularFile as refusal:
        raise UserError(f"input file {refusal}") from None
    except OSError as error:
        raise UserError(f"cannot read input file {path}: {error.strerror}") from None
    if len(data) > limit:
        raise UserError(_too_large(f"input file {path}", limit, setting))
    return data


def files_below(source: Path) -> list[tuple[str, Path]]:
    """The regular files of the host folder ``source`` by ``/``-separated names relative to it
    (links left out), or ``[("", source)]`` when ``source`` is not a folder."""
    if not source.is_dir():
        return [("", source)]
    return [
        (path.relative_to(source).as_posix(), path)
        for path in sorted(source.rglob("*"))
        if path.is_file() and not path.is_symlink()
    ]


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


def _too_large(what: str, limit: int, setting: str = "max_input_bytes") -> str:
    return f"{what}: more than the input limit of {limit} bytes (raise {setting} to allow more)"
