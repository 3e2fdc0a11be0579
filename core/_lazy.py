"""Names a package exports but loads only when first used (PEP 562).

A command that needs one settings model should not pay for every agent, the model
client and Docker's SDK; a package keeps its public names and imports each one's module
on first access instead of at ``import``.

A lazy package has two lists of the same names: the imports of its ``if TYPE_CHECKING:``
block, each in the re-export form ``from ._agent import Agent as Agent`` (what type
checkers and editors read), and a plain mapping of each name to the module that defines
it (what the package's ``__getattr__`` reads at run time; its keys, in order, are
``__all__``). ``tests/test_public_surface.py`` holds the two lists equal and checks that
every name of the mapping resolves. A mapping rather than the source's own imports: the
first lookup of a name then costs a dictionary read, not parsing the package's source.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

LazyExports = Mapping[str, str]
"""Public name → the module that defines it, as a package would import it (``._agent``,
``sandcrew.crew._crew``)."""


def lazy_exports(
    package: str, exports: LazyExports
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package`` (a package, or a module of one), loading
    each of ``exports`` on first use.

    ``__all__`` is the names of ``exports``, in order. A loaded name is stored in the
    package, so later lookups are plain attribute reads.
    """
    names = dict(exports)

    def __getattr__(name: str) -> Any:
        if name == "__all__":
            value: Any = list(names)
        else:
            try:
                module_name = names[name]
            except KeyError:
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
            # Relative to the package a module sits in (a package is its own).
            anchor = sys.modules[package].__package__
            value = getattr(importlib.import_module(module_name, anchor), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__
