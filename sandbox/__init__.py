"""Code extraction and throwaway, hardened Docker containers for untrusted code."""

import typing

# Type checkers read the imports; at run time each name loads on first use, so a
# program pays only for the modules it touches.
if typing.TYPE_CHECKING:
    from ._batch import BatchContainerLost, BatchSandbox
    from ._config import SandboxConfig
    from ._docker_client import connect as connect_docker
    from ._docker_client import resolve_endpoint as docker_endpoint
    from ._errors import (
        CodeTooLargeError,
        DockerUnavailableError,
        EmptyCodeError,
        ImageNotFoundError,
        SandboxError,
        UnsupportedLanguageError,
    )
    from ._extract import CodeBlock, extract_code_blocks
    from ._files import Artifact, load_input_files
    from ._images import DEFAULT_IMAGES, BaseSource, ImageBuildError, build_images, list_images
    from ._languages import SUPPORTED_LANGUAGES, normalize_language
    from ._protocol import Sandbox
    from ._reaper import reap_orphans
    from ._result import ExecutionResult
    from ._sandbox import DockerSandbox
    from ._saving import save_artifacts
    from ._seccomp import describe as describe_seccomp_profile
    from ._session import (
        Session,
        SessionClosedError,
        SessionFileError,
        SessionLimitError,
        SyncSession,
    )
    from ._session_models import (
        CellError,
        CellResult,
        DisplayOutput,
        FileEntry,
        OutputEvent,
        SessionEvent,
        SessionLimits,
    )
    from ._signals import treat_sigterm_as_interrupt
else:
    from ..core import lazy_exports as _lazy_exports

    __getattr__, __dir__ = _lazy_exports(
        __name__,
        {
            "BatchContainerLost": "._batch",
            "BatchSandbox": "._batch",
            "SandboxConfig": "._config",
            "connect_docker": "._docker_client:connect",
            "docker_endpoint": "._docker_client:resolve_endpoint",
            "CodeTooLargeError": "._errors",
            "DockerUnavailableError": "._errors",
            "EmptyCodeError": "._errors",
            "ImageNotFoundError": "._errors",
            "SandboxError": "._errors",
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
            "SUPPORTED_LANGUAGES": "._languages",
            "normalize_language": "._languages",
            "Sandbox": "._protocol",
            "reap_orphans": "._reaper",
            "ExecutionResult": "._result",
            "save_artifacts": "._saving",
            "DockerSandbox": "._sandbox",
            "describe_seccomp_profile": "._seccomp:describe",
            "Session": "._session",
            "SessionClosedError": "._session",
            "SessionFileError": "._session",
            "SessionLimitError": "._session",
            "SyncSession": "._session",
            "CellError": "._session_models",
            "CellResult": "._session_models",
            "DisplayOutput": "._session_models",
            "FileEntry": "._session_models",
            "OutputEvent": "._session_models",
            "SessionEvent": "._session_models",
            "SessionLimits": "._session_models",
            "treat_sigterm_as_interrupt": "._signals",
        },
    )

__all__ = [
    "DEFAULT_IMAGES",
    "SUPPORTED_LANGUAGES",
    "Artifact",
    "BaseSource",
    "BatchContainerLost",
    "BatchSandbox",
    "CellError",
    "CellResult",
    "CodeBlock",
    "CodeTooLargeError",
    "DisplayOutput",
    "DockerSandbox",
    "DockerUnavailableError",
    "EmptyCodeError",
    "ExecutionResult",
    "FileEntry",
    "ImageBuildError",
    "ImageNotFoundError",
    "OutputEvent",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "Session",
    "SessionClosedError",
    "SessionEvent",
    "SessionFileError",
    "SessionLimitError",
    "SessionLimits",
    "SyncSession",
    "UnsupportedLanguageError",
    "build_images",
    "connect_docker",
    "describe_seccomp_profile",
    "docker_endpoint",
    "extract_code_blocks",
    "list_images",
    "load_input_files",
    "normalize_language",
    "reap_orphans",
    "save_artifacts",
    "treat_sigterm_as_interrupt",
]
