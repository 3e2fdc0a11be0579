"""Every exception class sandcrew raises on purpose, in one place (docs/errors.md draws
the tree). The packages that raise them export the ones their callers catch most."""

import typing

# This module's exports: type checkers read these imports; at run time each name loads on
# first use from the module the mapping below names (see sandcrew.core._lazy; the two lists
# are held equal by tests/test_public_surface.py), so catching a session's error does not
# import the agents, nor a crew's error Docker's SDK.
if typing.TYPE_CHECKING:
    from sandcrew._extras import (
        MissingExtraError as MissingExtraError,
    )
    from sandcrew.agents._function_call import (
        FunctionCallRequiredError as FunctionCallRequiredError,
    )
    from sandcrew.agents._model_errors import (
        EmptyReplyError as EmptyReplyError,
        EndpointTimeoutError as EndpointTimeoutError,
        ModelReplyError as ModelReplyError,
        ToolsUnsupportedError as ToolsUnsupportedError,
        TruncatedReplyError as TruncatedReplyError,
    )
    from sandcrew.agents._orchestrators import (
        AmbiguousWorkflowError as AmbiguousWorkflowError,
    )
    from sandcrew.agents._tokens import (
        TokenBudgetExhaustedError as TokenBudgetExhaustedError,
    )
    from sandcrew.core import (
        ConfigurationError as ConfigurationError,
        ErrorCode as ErrorCode,
        InfrastructureError as InfrastructureError,
        InvalidSettings as InvalidSettings,
        ModelBehaviorError as ModelBehaviorError,
        SandcrewError as SandcrewError,
        UserError as UserError,
    )
    from sandcrew.functions._errors import (
        FunctionDefinitionError as FunctionDefinitionError,
    )
    from sandcrew.sandbox._batch import (
        BatchContainerLost as BatchContainerLost,
    )
    from sandcrew.sandbox._errors import (
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
    from sandcrew.sandbox._images import (
        ImageBuildError as ImageBuildError,
    )
    from sandcrew.suites._errors import (
        SuiteError as SuiteError,
    )
else:
    from sandcrew.core import lazy_exports as _lazy_exports

    __getattr__, __dir__ = _lazy_exports(
        __name__,
        {
            "MissingExtraError": "sandcrew._extras",
            "FunctionCallRequiredError": "sandcrew.agents._function_call",
            "EmptyReplyError": "sandcrew.agents._model_errors",
            "EndpointTimeoutError": "sandcrew.agents._model_errors",
            "ModelReplyError": "sandcrew.agents._model_errors",
            "ToolsUnsupportedError": "sandcrew.agents._model_errors",
            "TruncatedReplyError": "sandcrew.agents._model_errors",
            "AmbiguousWorkflowError": "sandcrew.agents._orchestrators",
            "TokenBudgetExhaustedError": "sandcrew.agents._tokens",
            "ConfigurationError": "sandcrew.core",
            "ErrorCode": "sandcrew.core",
            "InfrastructureError": "sandcrew.core",
            "InvalidSettings": "sandcrew.core",
            "ModelBehaviorError": "sandcrew.core",
            "SandcrewError": "sandcrew.core",
            "UserError": "sandcrew.core",
            "FunctionDefinitionError": "sandcrew.functions._errors",
            "BatchContainerLost": "sandcrew.sandbox._batch",
            "CodeTooLargeError": "sandcrew.sandbox._errors",
            "DockerUnavailableError": "sandcrew.sandbox._errors",
            "EmptyCodeError": "sandcrew.sandbox._errors",
            "ImageNotFoundError": "sandcrew.sandbox._errors",
            "SandboxError": "sandcrew.sandbox._errors",
            "SessionClosedError": "sandcrew.sandbox._errors",
            "SessionExpiredError": "sandcrew.sandbox._errors",
            "SessionFileError": "sandcrew.sandbox._errors",
            "SessionFileNotFoundError": "sandcrew.sandbox._errors",
            "SessionLimitError": "sandcrew.sandbox._errors",
            "SessionLostError": "sandcrew.sandbox._errors",
            "SessionTimeoutError": "sandcrew.sandbox._errors",
            "UnsupportedLanguageError": "sandcrew.sandbox._errors",
            "ImageBuildError": "sandcrew.sandbox._images",
            "SuiteError": "sandcrew.suites._errors",
        },
    )
