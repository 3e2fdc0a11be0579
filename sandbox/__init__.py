"""Throwaway, hardened Docker containers and live sessions for untrusted code.

The clients, their configs, what a run or a cell did, and the errors a caller catches
most; every error class is in :mod:`sandcrew.errors`. Helpers live in named submodules:
:mod:`.images` (build and list the sandbox images), :mod:`.host` (the Docker engine,
orphaned containers, diagnostics), :mod:`.code` (fenced code blocks, languages),
:mod:`.files` (input files, saved artifacts) and :mod:`.live` (output as it comes).
"""

import typing

# This package's exports: type checkers read these imports; at run time each name loads
# on first use from the module the mapping below names (see sandcrew.core._lazy), and
# __all__ lists them. The two lists name the same names (tests/test_public_surface.py).
if typing.TYPE_CHECKING:
    from ._batch import (
        BatchSandbox as BatchSandbox,
    )
    from ._config import (
        SandboxConfig as SandboxConfig,
    )
    from ._egress_policy import (
        EgressPolicy as EgressPolicy,
        HostRule as HostRule,
        SecretHeader as SecretHeader,
    )
    from ._errors import (
        SandboxError as SandboxError,
        SessionClosedError as SessionClosedError,
    )
    from ._files import (
        Artifact as Artifact,
    )
    from ._lazy_session import (
        LazySession as LazySession,
    )
    from ._network_log import (
        NetworkEvent as NetworkEvent,
        NetworkLog as NetworkLog,
    )
    from ._protocol import (
        RunningCommand as RunningCommand,
        Sandbox as Sandbox,
        SandboxWithSessions as SandboxWithSessions,
        SupportsSessions as SupportsSessions,
    )
    from ._result import (
        ExecutionResult as ExecutionResult,
        Outcome as Outcome,
    )
    from ._sandbox import (
        DockerSandbox as DockerSandbox,
    )
    from ._session import (
        DockerSession as DockerSession,
    )
    from ._session_base import Session as Session
    from ._session_models import (
        CellError as CellError,
        CellResult as CellResult,
        CommandResult as CommandResult,
        DisplayOutput as DisplayOutput,
        FileEntry as FileEntry,
        OutputEvent as OutputEvent,
        SessionEvent as SessionEvent,
        SessionLimits as SessionLimits,
    )
    from ._session_pool import (
        SessionPool as SessionPool,
    )
    from ._session_sync import (
        SyncSession as SyncSession,
    )
else:
    from ..core import lazy_exports as _lazy_exports

    __getattr__, __dir__ = _lazy_exports(
        __name__,
        {
            "BatchSandbox": "._batch",
            "SandboxConfig": "._config",
            "EgressPolicy": "._egress_policy",
            "HostRule": "._egress_policy",
            "SecretHeader": "._egress_policy",
            "SandboxError": "._errors",
            "SessionClosedError": "._errors",
            "Artifact": "._files",
            "LazySession": "._lazy_session",
            "NetworkEvent": "._network_log",
            "NetworkLog": "._network_log",
            "RunningCommand": "._protocol",
            "Sandbox": "._protocol",
            "SandboxWithSessions": "._protocol",
            "SupportsSessions": "._protocol",
            "ExecutionResult": "._result",
            "Outcome": "._result",
            "DockerSandbox": "._sandbox",
            "DockerSession": "._session",
            "Session": "._session_base",
            "CellError": "._session_models",
            "CellResult": "._session_models",
            "CommandResult": "._session_models",
            "DisplayOutput": "._session_models",
            "FileEntry": "._session_models",
            "OutputEvent": "._session_models",
            "SessionEvent": "._session_models",
            "SessionLimits": "._session_models",
            "SessionPool": "._session_pool",
            "SyncSession": "._session_sync",
        },
    )
