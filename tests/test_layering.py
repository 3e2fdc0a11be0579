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


def _sandcrew_imports(path: Path, package: str) -> set[str]:
    """The sandcrew packages a module imports, resolved to their top-level folder."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                continue  # inside the same package
            if node.level == 2:
                found.add((node.module or "").split(".")[0])
            elif node.module and node.module.startswith("sandcrew"):
                parts = node.module.split(".")
                found.add(parts[1] if len(parts) > 1 else "sandcrew")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("sandcrew"):
                    parts = alias.name.split(".")
                    found.add(parts[1] if len(parts) > 1 else "sandcrew")
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
        if f"from sandcrew.{package}" in path.read_text(encoding="utf-8")
    ]
    assert absolute == []
