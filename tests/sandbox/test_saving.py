"""Saving runs' files on the host: the folder chosen, a later run's file, what is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandcrew.sandbox import Artifact, ExecutionResult
from sandcrew.sandbox.files import save_artifacts


def result_with(*files: tuple[str, bytes]) -> ExecutionResult:
    return ExecutionResult(
        language="python",
        exit_code=0,
        stdout="",
        stderr="",
        duration=0.1,
        image="sandcrew/python:latest",
        run_id="run",
        timeout=10,
        memory_limit_bytes=1 << 28,
        artifacts=tuple(
            Artifact(name=name, size=len(data), media_type="text/plain", data=data)
            for name, data in files
        ),
    )


def test_a_new_folder_is_used_as_named_and_a_later_run_replaces_its_own_file(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "new" / "results"
    first, second = result_with(("a.txt", b"1"), ("b/c.txt", b"c")), result_with(("a.txt", b"2"))

    saved, chosen = save_artifacts([first, second], folder)

    assert chosen == folder
    assert (folder / "a.txt").read_bytes() == b"2"
    assert (folder / "b" / "c.txt").read_bytes() == b"c"
    assert [artifact.path for run in saved for artifact in run.artifacts] == [
        str(folder / "a.txt"),
        str(folder / "b" / "c.txt"),
        str(folder / "a.txt"),
    ]
    assert all(not run.artifacts_skipped for run in saved)


def test_a_folder_with_files_gets_a_fresh_folder_inside_it(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"mine")

    [saved], chosen = save_artifacts([result_with(("a.txt", b"theirs"))], tmp_path)

    assert chosen is not None
    assert chosen.parent == tmp_path
    assert chosen.name.startswith("sandcrew-")
    assert (tmp_path / "a.txt").read_bytes() == b"mine"
    assert (chosen / "a.txt").read_bytes() == b"theirs"
    [artifact] = saved.artifacts
    assert artifact.path == str(chosen / "a.txt")


def test_nothing_to_save_makes_no_folder(tmp_path: Path) -> None:
    saved, chosen = save_artifacts([result_with()], tmp_path / "results")

    assert chosen is None
    assert not (tmp_path / "results").exists()
    assert saved == [result_with()]


@pytest.mark.parametrize(
    ("name", "why"),
    [
        (".git/config", "'.git' is a version-control folder"),
        ("x/.Hg/hgrc", "'.Hg' is a version-control folder"),
        (".git", "'.git' is a version-control folder"),
        ("a/../b", "not a plain relative name"),
        ("/etc/passwd", "not a plain relative name"),
    ],
)
def test_refused_names_keep_their_bytes_and_get_a_note(tmp_path: Path, name: str, why: str) -> None:
    [saved], _ = save_artifacts([result_with((name, b"x"), ("ok.txt", b"ok"))], tmp_path / "r")

    refused, fine = saved.artifacts
    assert refused.path is None
    assert refused.data == b"x"
    assert fine.path == str(tmp_path / "r" / "ok.txt")
    assert saved.artifacts_skipped == (f"{name}: not saved on the host: {why}",)
    assert sorted(os.listdir(tmp_path / "r")) == ["ok.txt"]


def test_a_file_where_a_later_run_wants_a_folder_is_a_note(tmp_path: Path) -> None:
    runs = [result_with(("a", b"file")), result_with(("a/b", b"x"))]

    saved, _ = save_artifacts(runs, tmp_path / "r")

    assert (tmp_path / "r" / "a").read_bytes() == b"file"
    assert saved[1].artifacts_skipped == (
        "a/b: not saved on the host: a: it is a file, not a folder",
    )
