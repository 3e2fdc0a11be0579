"""Code extraction and throwaway, hardened Docker containers for untrusted code."""

import typing

# The one list of this package's exports: type checkers read these imports; at run
# time each name loads on first use (see sandcrew.core._lazy), and __all__ lists them.
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

    __getattr__, __dir__ = _lazy_exports(__name__)
