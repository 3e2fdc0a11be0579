"""Code extraction and throwaway, hardened Docker containers for untrusted code."""

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
from ._lifecycle import treat_sigterm_as_interrupt
from ._protocol import Sandbox
from ._reaper import reap_orphans
from ._result import ExecutionResult
from ._sandbox import DockerSandbox
from ._seccomp import describe as describe_seccomp_profile

__all__ = [
    "DEFAULT_IMAGES",
    "SUPPORTED_LANGUAGES",
    "Artifact",
    "BaseSource",
    "BatchContainerLost",
    "BatchSandbox",
    "CodeBlock",
    "CodeTooLargeError",
    "DockerSandbox",
    "DockerUnavailableError",
    "EmptyCodeError",
    "ExecutionResult",
    "ImageBuildError",
    "ImageNotFoundError",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
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
    "treat_sigterm_as_interrupt",
]
