"""`--file` and `--out` of `sandcrew run` and `sandcrew solve`: input paths, saved artifacts."""

from __future__ import annotations

from pathlib import Path

from sandcrew.errors import UserError
from sandcrew.sandbox import ExecutionResult
from sandcrew.sandbox._files import files_below
from sandcrew.sandbox.files import save_artifacts


def files_from_paths(paths: list[Path]) -> dict[str, Path]:
    """Input names for command-line paths: a file by its name, a folder's files below it.

    Links inside a folder are not followed; a file named twice is an error.
    """
    files: dict[str, Path] = {}

    def add(name: str, path: Path) -> None:
        if name in files:
            raise UserError(f"two input files would both be named {name!r}: {files[name]}, {path}")
        files[name] = path

    for path in paths:
        if path.is_dir():
            for name, found in files_below(path):
                add(name, found)
        elif path.is_file():
            add(path.name, path)
        elif path.exists():
            raise UserError(f"input file {path} is not a regular file (nor a folder)")
        else:
            raise UserError(f"input file not found: {path}")
    return files


def check_out_folder(folder: Path | None) -> None:
    """Refuse an ``--out`` that is not a folder before anything runs."""
    if folder is not None and folder.exists() and not folder.is_dir():
        raise UserError(f"--out {folder} is not a folder")


def save_run_files(
    results: list[ExecutionResult], folder: Path
) -> tuple[list[ExecutionResult], str | None]:
    """Save the runs' files under ``--out``; the results that know their paths, and a note
    naming the new folder when ``folder`` was not empty (see :func:`save_artifacts`)."""
    saved, chosen = save_artifacts(results, folder)
    if chosen is None or chosen == folder:
        return saved, None
    return saved, f"--out {folder} is not empty: the files were saved in the new folder {chosen}"
