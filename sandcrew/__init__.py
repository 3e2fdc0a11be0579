"""sandcrew: a crew of agents that writes, reviews and safely runs code.

Importing this package has no side effects; the heavy parts live in
``sandcrew.functions``, ``sandcrew.sandbox``, ``sandcrew.agents`` and the
application modules.
"""

from sandcrew.errors import (
    ConfigurationError,
    InfrastructureError,
    InvalidSettings,
    ModelBehaviorError,
    SandcrewError,
    UserError,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigurationError",
    "InfrastructureError",
    "InvalidSettings",
    "ModelBehaviorError",
    "SandcrewError",
    "UserError",
    "__version__",
]
