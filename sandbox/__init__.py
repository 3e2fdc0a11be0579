"""Code extraction and throwaway, hardened Docker containers for untrusted code."""

import typing

# This package's exports: type checkers read these imports; at run time each name loads
# on first use from the module the mapping below names (see sandcrew.core._lazy), and
# __all__ lists them. The two lists name the same names (tests/test_public_surface.py).
if typing.TYPE_CHECKING:
    from ._batch import (
        BatchContainerLost as BatchContainerLost,
        BatchSandbox as BatchSandbox,
    )
    from ._config import (
        SandboxConfig as SandboxConfig,
    )
    from ._docker_client import (
        connect_docker as connect_docker,
        docker_endpoint as docker_endpoint,
    )
    from ._egress_policy import (
        EgressPolicy as EgressPolicy,
        HostRule as HostRule,
        SecretHeader as SecretHeader,
    )
    from ._egress_proxy import (
        EgressNetwork as EgressNetwork,
    )
    from ._errors import (
        CodeTooLargeError as CodeTooLargeError,
        DockerUnavailableError as DockerUnavailableError,
        EmptyCodeError as EmptyCodeError,
        ImageNotFoundError as ImageNotFoundError,
        SandboxError as SandboxError,
        SessionClosedError as SessionClosedError,
        SessionExpiredError as SessionExpiredError,
        SessionFileError as SessionFileError,
        SessionFileNotFoundError as SessionFileNotFoundError,
        SessionLimitError as SessionLimitError,
        SessionLostError as SessionLostError,
        SessionTimeoutError as SessionTimeoutError,
        UnsupportedLanguageError as UnsupportedLanguageError,
    )
    from ._extract import (
        CodeBlock as CodeBlock,
        extract_code_blocks as extract_code_blocks,
    )
    from ._files import (
        Artifact as Artifact,
        load_input_files as load_input_files,
    )
    from ._images import (
        DEFAULT_IMAGES as DEFAULT_IMAGES,
        BaseSource as BaseSource,
        ImageBuildError as ImageBuildError,
        build_images as build_images,
        list_images as list_images,
    )
    from ._inline import (
        INLINE_BYTES as INLINE_BYTES,
    )
    from ._languages import (
        SUPPORTED_LANGUAGES as SUPPORTED_LANGUAGES,
        normalize_language as normalize_language,
    )
    from ._live import (
        OutputCallback as OutputCallback,
        tell_at_end as tell_at_end,
    )
    from ._network_log import (
        NetworkEvent as NetworkEvent,
        NetworkLog as NetworkLog,
    )
    from ._protocol import (
        RunningCommand as RunningCommand,
        Sandbox as Sandbox,
        SandboxWithSessions as SandboxWithSessions,
        Session as Session,
        SupportsSessions as SupportsSessions,
    )
    from ._reaper import (
        reap_orphans as reap_orphans,
    )
    from ._result import (
        ExecutionResult as ExecutionResult,
        Outcome as Outcome,
    )
    from ._sandbox import (
        DockerSandbox as DockerSandbox,
    )
    from ._saving import (
        save_artifacts as save_artifacts,
    )
    from ._seccomp import (
        describe_seccomp_profile as describe_seccomp_profile,
    )
    from ._session import (
        DockerSession as DockerSession,
    )
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
    from ._signals import (
        treat_sigterm_as_interrupt as treat_sigterm_as_interrupt,
    )
    from ._uids import (
        describe_uid_leases as describe_uid_leases,
    )
else:
    from ..core import lazy_exports as _lazy_exports

    __getattr__, __dir__ = _lazy_exports(
        __name__,
        {
            "BatchContainerLost": "._batch",
            "BatchSandbox": "._batch",
            "SandboxConfig": "._config",
            "connect_docker": "._docker_client",
            "docker_endpoint": "._docker_client",
            "EgressPolicy": "._egress_policy",
            "HostRule": "._egress_policy",
            "SecretHeader": "._egress_policy",
            "EgressNetwork": "._egress_proxy",
            "CodeTooLargeError": "._errors",
            "DockerUnavailableError": "._errors",
            "EmptyCodeError": "._errors",
            "ImageNotFoundError": "._errors",
            "SandboxError": "._errors",
            "SessionClosedError": "._errors",
            "SessionExpiredError": "._errors",
            "SessionFileError": "._errors",
            "SessionFileNotFoundError": "._errors",
            "SessionLimitError": "._errors",
            "SessionLostError": "._errors",
            "SessionTimeoutError": "._errors",
            "UnsupportedLanguageError": "._errors",
            "CodeBlock": "._extract",
            "extract_code_blocks": "._extract",
            "Artifact": "._files",
            "load_input_files": "._files",
            "DEFAULT_IMAGES": "._images",
            "BaseSource": "._images",
            "ImageBuildError": "._images",
            "build_images": "._images",
            "list_images": "._images",
            "INLINE_BYTES": "._inline",
            "SUPPORTED_LANGUAGES": "._languages",
            "normalize_language": "._languages",
            "OutputCallback": "._live",
            "tell_at_end": "._live",
            "NetworkEvent": "._network_log",
            "NetworkLog": "._network_log",
            "RunningCommand": "._protocol",
            "Sandbox": "._protocol",
            "SandboxWithSessions": "._protocol",
            "Session": "._protocol",
            "SupportsSessions": "._protocol",
            "reap_orphans": "._reaper",
            "ExecutionResult": "._result",
            "Outcome": "._result",
            "DockerSandbox": "._sandbox",
            "save_artifacts": "._saving",
            "describe_seccomp_profile": "._seccomp",
            "DockerSession": "._session",
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
            "treat_sigterm_as_interrupt": "._signals",
            "describe_uid_leases": "._uids",
        },
    )
