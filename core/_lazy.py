"""Names a package exports but loads only when first used (PEP 562).

A command that needs one settings model should not pay for every agent, the model
client and Docker's SDK; a package keeps its public names and imports each one's module
on first access instead of at ``import``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, loading each exported name on first use.

    ``exports`` maps a public name to the module that defines it, relative to ``package``
    (``"._agent"``), with ``":attribute"`` when the module calls it differently
    (``"._docker_client:connect"``). A loaded name is stored in the package, so later
    lookups are plain attribute reads.
    """

    def __getattr__(name: str) -> Any:
        try:
            target = exports[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        module_name, _, attribute = target.partition(":")
        value = getattr(importlib.import_module(module_name, package), attribute or name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
