"""Every package publishes exactly its ``__all__``: no name leaks out by accident.

A public name (no leading underscore) in a package's namespace that is not in
``__all__`` is an accidental export (an import the package needed, say); a name
in ``__all__`` that the package lacks is a broken promise. The per-package
export tests say which names are meant.
"""

from __future__ import annotations

import importlib
import types

import pytest

PACKAGES = [
    "sandcrew",
    "sandcrew.core",
    "sandcrew.functions",
    "sandcrew.sandbox",
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
