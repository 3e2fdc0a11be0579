"""`--file` and `--out` of `sandcrew run` and `sandcrew solve`: input paths, saved artifacts."""

from __future__ import annotations

from pathlib import Path

from sandcrew.errors import UserError
from sandcrew.sandbox import ExecutionResult


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
            for found in sorted(path.rglob("*")):
                if found.is_file() and not found.is_symlink():
                    add(found.relative_to(path).as_posix(), found)
        elif path.is_file():
            add(path.name, path)
        else:
            raise UserError(f"input file not found: {path}")
    return files


def save_artifacts(result: ExecutionResult, folder: Path) -> ExecutionResult:
    """Write the result's artifacts under ``folder``; the returned result knows their paths."""
    if folder.exists() and not folder.is_dir():
        raise UserError(f"--out {folder} is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"cannot create --out folder {folder}: {error.strerror}") from None
    saved = tuple(artifact.save(folder) for artifact in result.artifacts)
    return result.model_copy(update={"artifacts": saved})
