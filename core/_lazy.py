"""Names a package exports but loads only when first used (PEP 562).

A command that needs one settings model should not pay for every agent, the model
client and Docker's SDK; a package keeps its public names and imports each one's module
on first access instead of at ``import``.

The package lists its exports once, as the imports of its ``if TYPE_CHECKING:`` block,
each in the re-export form ``from ._agent import Agent as Agent``: type checkers and
editors read them as ordinary imports, and at run time this module reads the same
block (from the package's source, on the first lookup) for where each name lives and
for ``__all__``. Eager imports would be one list too, but the crew's settings (read by
every command, ``run`` included) sit beside the agents and the model client, so an
eager package would make ``sandcrew run`` import the chat it never uses.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def exported_imports(source: str) -> dict[str, tuple[str, str]]:
    """Public name → (module, attribute) for each import of the ``if TYPE_CHECKING:`` block.

    ``module`` is as written (``._agent``, ``..core``); ``attribute`` is the name the module
    defines (``from ._docker_client import connect as connect_docker`` exports
    ``connect_docker`` as ``connect`` of ``._docker_client``).
    """
    exports: dict[str, tuple[str, str]] = {}
    for block in ast.parse(source).body:
        if not (isinstance(block, ast.If) and _is_type_checking(block.test)):
            continue
        for statement in block.body:
            if isinstance(statement, ast.ImportFrom):
                module = "." * statement.level + (statement.module or "")
                for alias in statement.names:
                    exports[alias.asname or alias.name] = (module, alias.name)
    return exports


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def lazy_exports(package: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, loading each exported name on first use.

    The exports are the imports of the package's ``if TYPE_CHECKING:`` block (see
    :func:`exported_imports`), and ``__all__`` lists them. A loaded name is stored in the
    package, so later lookups are plain attribute reads.
    """
    found: dict[str, tuple[str, str]] = {}

    def exports() -> dict[str, tuple[str, str]]:
        if not found:
            source = Path(str(sys.modules[package].__file__)).read_text(encoding="utf-8")
            found.update(exported_imports(source))
        return found

    def __getattr__(name: str) -> Any:
        if name == "__all__":
            value: Any = list(exports())
        else:
            try:
                module_name, attribute = exports()[name]
            except KeyError:
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
            # Relative to the package a module sits in (a package is its own).
            anchor = sys.modules[package].__package__
            value = getattr(importlib.import_module(module_name, anchor), attribute)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports()})

    return __getattr__, __dir__
