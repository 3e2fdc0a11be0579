"""Every package publishes exactly its ``__all__``: no name leaks out by accident.

A public name (no leading underscore) in a package's namespace that is not in
``__all__`` is an accidental export (an import the package needed, say); a name
in ``__all__`` that the package lacks is a broken promise; a class or function
from another library in ``__all__`` is not ours to publish. Each package lists its
exports once (its imports); these tests hold every package to that list.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

PACKAGES = [
    "sandcrew",
    "sandcrew.core",
    "sandcrew.functions",
    "sandcrew.sandbox",
    "sandcrew.sandbox.images",
    "sandcrew.sandbox.host",
    "sandcrew.sandbox.code",
    "sandcrew.sandbox.files",
    "sandcrew.sandbox.live",
    "sandcrew.errors",
    "sandcrew.agents",
    "sandcrew.crew",
    "sandcrew.suites",
    "sandcrew.testing",
    "sandcrew.mcp",
    "sandcrew.integrations",
]


def _public_names(module: types.ModuleType) -> set[str]:
    # dir() and getattr(), not vars(): a package may load its names on first use.
    return {
        name
        for name in dir(module)
        if not name.startswith("_")
        # Subpackages appear in their parent's namespace once imported; `annotations`
        # is the __future__ feature flag.
        and not isinstance(getattr(module, name), types.ModuleType)
        and name != "annotations"
    }


@pytest.mark.parametrize("package", PACKAGES)
def test_public_names_are_exactly_all(package: str) -> None:
    module = importlib.import_module(package)
    exported = set(module.__all__)
    assert {name for name in exported if not hasattr(module, name)} == set(), (
        "in __all__ but missing"
    )
    assert _public_names(module) - exported == set(), "public but not in __all__"
    assert len(module.__all__) == len(exported), "__all__ lists a name twice"


@pytest.mark.parametrize("package", PACKAGES)
def test_exported_classes_and_functions_are_sandcrews_own(package: str) -> None:
    module = importlib.import_module(package)
    foreign = [
        name
        for name in module.__all__
        if (inspect.isclass(value := getattr(module, name)) or inspect.isfunction(value))
        and not value.__module__.startswith("sandcrew.")
    ]
    assert foreign == []


def test_the_sandbox_package_exports_its_clients_configs_results_and_errors_only() -> None:
    """Helpers live in named submodules; the package itself stays a page one can read."""
    assert len(importlib.import_module("sandcrew.sandbox").__all__) <= 30


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_error_is_in_sandcrew_errors(package: str) -> None:
    errors = importlib.import_module("sandcrew.errors")
    module = importlib.import_module(package)
    exported_errors = {
        name: value
        for name in module.__all__
        if inspect.isclass(value := getattr(module, name))
        and issubclass(value, errors.SandcrewError)
    }
    assert {name: getattr(errors, name, None) for name in exported_errors} == exported_errors


LAZY_PACKAGES = ["sandcrew.agents", "sandcrew.sandbox", "sandcrew.crew", "sandcrew.errors"]
# Everything that loads its names on first use: the packages and the helper modules.
LAZY_MODULES = [
    *LAZY_PACKAGES,
    "sandcrew.sandbox.code",
    "sandcrew.sandbox.files",
    "sandcrew.sandbox.host",
    "sandcrew.sandbox.images",
    "sandcrew.sandbox.live",
]


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_a_lazy_package_exports_exactly_what_its_type_checking_block_imports(
    package: str,
) -> None:
    module = importlib.import_module(package)
    tree = ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))
    [block] = [node for node in tree.body if isinstance(node, ast.If)]
    aliases = [
        alias
        for statement in block.body
        if isinstance(statement, ast.ImportFrom)
        for alias in statement.names
    ]
    # `X as X` is what type checkers take as a re-export: the names they see are the
    # names the package hands out at run time.
    assert [alias.name for alias in aliases if alias.asname != alias.name] == []
    assert module.__all__ == [alias.name for alias in aliases]
    assert len(module.__all__) >= 20


def _type_checking_imports(package: str) -> list[tuple[str, str]]:
    """(module, name) of each import of the package's ``if TYPE_CHECKING:`` block."""
    module = importlib.import_module(package)
    tree = ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))
    [block] = [node for node in tree.body if isinstance(node, ast.If)]
    return [
        ("." * statement.level + (statement.module or ""), alias.name)
        for statement in block.body
        if isinstance(statement, ast.ImportFrom)
        for alias in statement.names
    ]


# Run in a fresh interpreter: in this one, other tests have loaded names already, and a
# loaded name is a plain attribute that no longer goes through the lazy mapping.
_RESOLVE_EVERY_NAME = """
import importlib, json, sys
package_name, expected = sys.argv[1], json.loads(sys.argv[2])
package = importlib.import_module(package_name)
wrong = []
for module_name, name in expected:
    defined = getattr(importlib.import_module(module_name, package.__package__), name)
    if getattr(package, name) is not defined:
        wrong.append(name)
listed = set(dir(package))
print(json.dumps({"wrong": wrong, "not_in_dir": [n for _, n in expected if n not in listed]}))
"""


@pytest.mark.parametrize("package", LAZY_MODULES)
def test_the_lazy_mapping_resolves_every_name_to_its_module(package: str) -> None:
    """Each name of the TYPE_CHECKING block, looked up at run time, is that module's object:
    the lazy mapping names the right module for every export, and ``dir()`` lists it."""
    expected = _type_checking_imports(package)
    completed = subprocess.run(
        [sys.executable, "-c", _RESOLVE_EVERY_NAME, package, json.dumps(expected)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(completed.stdout) == {"wrong": [], "not_in_dir": []}


@pytest.mark.parametrize("package", LAZY_MODULES)
def test_a_lazy_package_refuses_a_name_it_does_not_export(package: str) -> None:
    module = importlib.import_module(package)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018


def test_importing_a_lazy_package_loads_none_of_its_modules() -> None:
    code = (
        "import sys, sandcrew.agents, sandcrew.sandbox, sandcrew.crew; "
        "print(sorted(name for name in sys.modules if name.startswith("
        "('sandcrew.agents.', 'sandcrew.sandbox.', 'sandcrew.crew.'))))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert completed.stdout.strip() == "[]"
