"""Optional dependencies: imported only when used, with an error that names the extra."""

from __future__ import annotations

import importlib.util

from sandcrew.errors import UserError


class MissingExtraError(UserError, ImportError):
    """An optional framework is not installed; the message names the extra that brings it."""

    def __init__(self, feature: str, package: str, extra: str) -> None:
        super().__init__(f"{feature} needs {package}: pip install 'sandcrew[{extra}]'")
        self.extra = extra


def missing(*modules: str) -> bool:
    """Whether any of ``modules`` (an extra's packages) is not installed."""
    return any(importlib.util.find_spec(module) is None for module in modules)
