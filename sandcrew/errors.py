"""The one exception hierarchy of sandcrew (defined in :mod:`sandcrew.core`)."""

from sandcrew.core import (
    ConfigurationError,
    ErrorCode,
    InfrastructureError,
    InvalidSettings,
    ModelBehaviorError,
    SandcrewError,
    UserError,
)

__all__ = [
    "ConfigurationError",
    "ErrorCode",
    "InfrastructureError",
    "InvalidSettings",
    "ModelBehaviorError",
    "SandcrewError",
    "UserError",
]
