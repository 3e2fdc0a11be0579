"""Where completions are checked: many (task, completion) pairs in, one verdict each out.

The check itself is :func:`~sandcrew.suites.check_program` run in a sandbox and
judged by the rules of ``_checks``; an executor only decides where and how many
at once. :class:`ContainerCheckExecutor` gives each check its own throwaway,
hardened container; :class:`BatchCheckExecutor` runs them all in one, each as its
own uid in its own directory (:func:`check_executor` picks one by isolation name).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from sandcrew.errors import ConfigurationError, ErrorCode, InfrastructureError

from ._checks import run_code_check
from ._errors import SuiteError
from ._outcomes import TaskOutcome, TaskStatus
from ._runner import Isolation, first_leaf
from ._tasks import CodeTask

if TYPE_CHECKING:
    from sandcrew.sandbox import Sandbox, SandboxConfig


_SAME_FOR_EVERY_CHECK = frozenset({ErrorCode.DOCKER_UNAVAILABLE, ErrorCode.IMAGE_NOT_FOUND})
"""Infrastructure failures that no other check would escape: they end the evaluation."""


@dataclass(frozen=True)
class CodeCheck:
    """One completion to check against its task.

    The program run is ``check_program(task, completion)``; it may take
    ``task.timeout`` seconds (``None``: the executor's sandbox default).
    """

    task: CodeTask
    completion: str


CheckCallback = Callable[[int, TaskOutcome], None]
"""Called with the index of a check in the sequence handed over and its verdict."""


class CheckExecutor(Protocol):
    """Checks many completions and reports each verdict as soon as it is known."""

    @property
    def name(self) -> str:
        """Shown in reports, e.g. ``container per check``."""
        ...

    async def check_all(
        self, checks: Sequence[CodeCheck], *, concurrency: int, on_outcome: CheckCallback
    ) -> None:
        """Check every item, at most ``concurrency`` at once, calling ``on_outcome`` for each.

        A check whose harness breaks (not the completion: the sandbox) gets an
        ``error`` outcome; a failure that would be the same for every check (bad
        settings, no Docker, no image) propagates. Cancelling
        stops the checks in flight and leaves no container behind.
        """
        ...


class ContainerCheckExecutor:
    """Each check in a new throwaway, hardened container of this machine's Docker engine."""

    name = "container per check"

    def __init__(self, sandbox_config: SandboxConfig | None = None) -> None:
        self.sandbox_config = sandbox_config

    async def check_all(
        self, checks: Sequence[CodeCheck], *, concurrency: int, on_outcome: CheckCallback
    ) -> None:
        from sandcrew.sandbox import DockerSandbox, SandboxConfig

        if concurrency < 1:
            raise SuiteError(f"concurrency must be at least 1 (got {concurrency})")
        async with DockerSandbox(self.sandbox_config or SandboxConfig()) as sandbox:
            await _check_in(sandbox, checks, concurrency, on_outcome)


async def _check_in(
    sandbox: Sandbox, checks: Sequence[CodeCheck], concurrency: int, on_outcome: CheckCallback
) -> None:
    pending = iter(enumerate(checks))
    try:
        async with asyncio.TaskGroup() as group:
            # A fixed set of workers pulling from one iterator keeps the
            # number of asyncio tasks flat however many samples there are.
            for _ in range(min(concurrency, len(checks))):
                group.create_task(_worker(pending, sandbox, on_outcome))
    except ExceptionGroup as group_error:
        raise first_leaf(group_error) from None


class BatchCheckExecutor:
    """Many checks in one throwaway, hardened container, each as its own uid in its own directory.

    See :class:`~sandcrew.sandbox.BatchSandbox` for what isolates the checks of
    a batch from each other. When the container fails, the checks that were
    running in it are each checked again alone, in a container of their own,
    and the rest of the batch goes on in a new container: a check that crashes
    the container fails only itself.
    """

    name = "batch container"

    def __init__(self, sandbox_config: SandboxConfig | None = None) -> None:
        self.sandbox_config = sandbox_config

    async def check_all(
        self, checks: Sequence[CodeCheck], *, concurrency: int, on_outcome: CheckCallback
    ) -> None:
        from sandcrew.sandbox import BatchSandbox, SandboxConfig

        if concurrency < 1:
            raise SuiteError(f"concurrency must be at least 1 (got {concurrency})")
        slots = min(concurrency, max(1, len(checks)))
        config = self.sandbox_config or SandboxConfig()
        async with BatchSandbox(config, slots=slots) as sandbox:
            # More checks in flight than slots: a slot that frees starts the next
            # check inside the container, without waiting for this host.
            await _check_in(sandbox, checks, sandbox.programs_at_once, on_outcome)


def check_executor(
    isolation: Isolation, sandbox_config: SandboxConfig | None = None
) -> CheckExecutor:
    """The executor of an isolation level."""
    if isolation == "batch":
        return BatchCheckExecutor(sandbox_config)
    return ContainerCheckExecutor(sandbox_config)


async def _worker(
    pending: Iterator[tuple[int, CodeCheck]], sandbox: Sandbox, on_outcome: CheckCallback
) -> None:
    for index, check in pending:
        on_outcome(index, await _checked(check, sandbox))


async def _checked(check: CodeCheck, sandbox: Sandbox) -> TaskOutcome:
    try:
        return await run_code_check(check.task, check.completion, sandbox)
    except ConfigurationError:
        raise  # the same for every check: stop and say what to configure
    except InfrastructureError as error:
        if error.code in _SAME_FOR_EVERY_CHECK:
            raise
        return TaskOutcome(status=TaskStatus.ERROR, detail=f"{type(error).__name__}: {error}")
    except Exception as error:  # one check's broken harness must not end the evaluation
        return TaskOutcome(status=TaskStatus.ERROR, detail=f"{type(error).__name__}: {error}")
