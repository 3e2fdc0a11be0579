"""The in-container modules are plain modules: standard library and their siblings only."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from sandcrew.sandbox._inside_command import inside_command

INSIDE = Path(__file__).resolve().parents[2] / "sandbox" / "_inside"


def _imports(path: Path) -> set[str]:
    """Top-level names of the absolute imports of a module (relative ones are siblings)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


# Drivers of session interpreters run as the program's uid with the image's
# site-packages (never as root): the Python one uses IPython.
PROGRAM_SIDE_IMPORTS = {"session_python.py": {"IPython", "traitlets"}}


@pytest.mark.parametrize("path", sorted(INSIDE.glob("*.py")), ids=lambda path: path.name)
def test_an_in_container_module_imports_the_standard_library_only(path: Path) -> None:
    allowed = set(sys.stdlib_module_names) | PROGRAM_SIDE_IMPORTS.get(path.name, set())
    assert _imports(path) - allowed == set()


@pytest.mark.parametrize("path", sorted(INSIDE.glob("*.py")), ids=lambda path: path.name)
def test_an_in_container_module_imports_its_siblings_by_name(path: Path) -> None:
    # The command carries the siblings named in "from .name import ..." lines only.
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            assert node.level == 1
            assert node.module is not None
            assert (INSIDE / f"{node.module}.py").is_file()


def test_an_unknown_entry_module_is_refused() -> None:
    with pytest.raises(ValueError, match="no in-container module 'nowhere'"):
        inside_command("nowhere")
