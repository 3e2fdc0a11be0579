"""The library folders stand alone: they import only their allowed neighbours.

functions ← agents → sandbox, all three on the shared core; none of them imports
the application package (cli, crew, suites, settings, testing).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parent.parent

ALLOWED = {
    "core": set(),
    "functions": {"core"},
    "sandbox": {"core"},
    "agents": {"core", "functions"},
}


def _absolute_sandcrew_imports(path: Path) -> set[str]:
    """The sandcrew packages a module imports by their absolute name."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "sandcrew":
                found.add(parts[1] if len(parts) > 1 else "sandcrew")
    return found


def _sandcrew_imports(path: Path, package: str) -> set[str]:
    """The other sandcrew packages a module imports, absolutely or as ``..neighbour``."""
    found = _absolute_sandcrew_imports(path)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 2:
            found.add((node.module or "").split(".")[0])
    found.discard(package)
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_library_folder_imports_only_its_allowed_neighbours(package: str) -> None:
    offenders = {
        str(path.relative_to(REPOSITORY)): imported - ALLOWED[package]
        for path in sorted((REPOSITORY / package).glob("*.py"))
        if (imported := _sandcrew_imports(path, package)) - ALLOWED[package]
    }
    assert offenders == {}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_library_folder_imports_its_own_modules_relatively(package: str) -> None:
    absolute = [
        str(path.relative_to(REPOSITORY))
        for path in sorted((REPOSITORY / package).glob("*.py"))
        if package in _absolute_sandcrew_imports(path)
    ]
    assert absolute == []
