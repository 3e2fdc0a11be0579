"""Optional dependencies: imported only when used, with an error that names the extra."""

from __future__ import annotations

from sandcrew.errors import UserError


class MissingExtraError(UserError, ImportError):
    """An optional framework is not installed; the message names the extra that brings it."""

    def __init__(self, feature: str, package: str, extra: str) -> None:
        super().__init__(f"{feature} needs {package}: pip install 'sandcrew[{extra}]'")
        self.extra = extra
