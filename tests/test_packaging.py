"""The distribution: top-level folders install under the one `sandcrew.*` namespace."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.sandbox.helpers import carried_sources

REPOSITORY = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(target),
            str(REPOSITORY),
        ],
        check=True,
        capture_output=True,
    )
    (built,) = target.glob("sandcrew-*.whl")
    return built


def test_wheel_maps_the_library_folders_under_sandcrew(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())

    for expected in (
        "sandcrew/functions/__init__.py",
        "sandcrew/sandbox/__init__.py",
        "sandcrew/sandbox/_inside/supervisor.py",
        "sandcrew/sandbox/_inside/batch.py",
        "sandcrew/agents/__init__.py",
        "sandcrew/core/__init__.py",
        "sandcrew/crew/__init__.py",
        "sandcrew/suites/__init__.py",
        "sandcrew/testing/pytest_plugin.py",
        "sandcrew/images/python/Dockerfile",
        "sandcrew/images/add-sandbox-user.sh",
        "sandcrew/images/install-wheels.sh",
        "sandcrew/suites/bundled/basics.yaml",
        "sandcrew/py.typed",
    ):
        assert expected in names
    # Bare top-level names would collide with other packages (e.g. `agents`).
    assert not any(
        name.split("/")[0] in {"core", "functions", "sandbox", "agents"} for name in names
    )
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "sandcrew = sandcrew.cli:main" in text
    assert "sandcrew = sandcrew.testing.pytest_plugin" in text


def test_installed_copy_imports_and_finds_its_data(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import sandcrew, sandcrew.functions, sandcrew.sandbox, sandcrew.agents, sandcrew.crew\n"
        "from sandcrew.suites import load_suite\n"
        "from importlib import resources\n"
        "from sandcrew.sandbox._supervisor import supervisor_command\n"
        "assert sandcrew.__file__.startswith(sys.argv[1]), sandcrew.__file__\n"
        "print((resources.files('sandcrew.images') / 'python' / 'Dockerfile').is_file())\n"
        "print(len(load_suite('basics').tasks))\n"
        "print(supervisor_command('/workspace', 1, 1)[4])\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe, str(target)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )

    assert completed.returncode == 0, completed.stderr
    found_image, task_count, bootstrap = completed.stdout.split("\n", 2)
    assert [found_image, task_count] == ["True", "14"]
    # The in-container modules are package data of the installed copy too.
    assert "def drop_to" in carried_sources(bootstrap)["privileges"]
