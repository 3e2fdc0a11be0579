"""The base of every settings model: one clear error for all of its invalid values.

The only module of the core that needs pydantic; the packages whose settings are pydantic
models (the sandbox's limits, the model endpoint, the crew's settings) import it
themselves, so the core's package stays free of it.
"""

from __future__ import annotations

import contextvars
from typing import Any, ClassVar, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    ValidationError,
    model_validator,
)

from ._errors import InvalidSettings
from ._text import describe_invalid_value

_validating: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "sandcrew_validating_settings", default=False
)


class SettingsModel(BaseModel):
    """Frozen, unknown keys refused; invalid values raise one :class:`InvalidSettings`.

    Every problem is listed at once under its dotted name. A settings model inside another
    (the sandbox's in the crew's) leaves the report to the outermost one, so a bad nested
    value reads ``sandbox.timeout: ...`` like a top-level one.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    settings_title: ClassVar[str] = "settings"
    """What the error calls these settings: ``invalid <title>: ...``."""

    @model_validator(mode="wrap")
    @classmethod
    def _one_clear_error(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        if _validating.get():
            return handler(data)
        outermost = _validating.set(True)
        try:
            return handler(data)
        except ValidationError as exc:
            problems = [
                (
                    ".".join(str(part) for part in error["loc"]),
                    describe_invalid_value({**error, "loc": ()}),
                )
                for error in exc.errors()
            ]
            raise InvalidSettings(cls.settings_title, problems) from None
        finally:
            _validating.reset(outermost)
