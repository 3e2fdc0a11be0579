"""The shared core of sandcrew's libraries: the error hierarchy, text helpers and
lazily loaded exports.

``sandcrew.functions``, ``sandcrew.sandbox`` and ``sandcrew.agents`` build on this
package and on nothing else of sandcrew's; it depends on nothing but the standard
library, except ``_settings_model`` (pydantic), which the packages with settings import
themselves.
"""

from ._closing import AsyncResource
from ._errors import (
    ConfigurationError,
    ErrorCode,
    InfrastructureError,
    InvalidSettings,
    ModelBehaviorError,
    SandcrewError,
    UserError,
)
from ._files import NotARegularFile, read_regular_file
from ._lazy import lazy_exports
from ._text import (
    counted,
    describe_invalid_value,
    environment_problem,
    summarize_problem,
    trim_middle,
)

__all__ = [
    "AsyncResource",
    "ConfigurationError",
    "ErrorCode",
    "InfrastructureError",
    "InvalidSettings",
    "ModelBehaviorError",
    "NotARegularFile",
    "SandcrewError",
    "UserError",
    "counted",
    "describe_invalid_value",
    "environment_problem",
    "lazy_exports",
    "read_regular_file",
    "summarize_problem",
    "trim_middle",
]
