"""The sandbox protocols: what front ends (crew, suites, CLI, MCP, frameworks) need.

:class:`Sandbox` runs programs, each in isolation; :class:`SupportsSessions` adds
sessions (:class:`~sandcrew.sandbox.Session`, a live interpreter kept between cells: an
abstract class, so that what every session shares is written once).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

from ._live import OutputCallback
from ._result import ExecutionResult
from ._session_base import Session
from ._session_models import CommandResult, OutputEvent, SessionLimits


@runtime_checkable
class Sandbox(Protocol):
    """Runs untrusted programs and reports what they did.

    :class:`~sandcrew.sandbox.DockerSandbox` is the implementation; another
    backend (another runtime, a remote engine, a test double) only has to
    provide these members. A program's own failures, timeouts and kills are
    data in the :class:`ExecutionResult`; only misuse and infrastructure
    failures raise.
    """

    @property
    def supported_languages(self) -> tuple[str, ...]:
        """Normalized names of the languages :meth:`run` accepts."""
        ...

    async def start(self) -> None:
        """Prepare to run (connect, warm up); runs call it themselves when needed."""
        ...

    async def image_packages(self, language: str = "python") -> tuple[str, ...] | None:
        """The packages ``language``'s image adds to the standard library (``()``: none);
        ``None`` when the image does not say."""
        ...

    async def run(
        self,
        code: str,
        language: str = "python",
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the program's own limit
        files: Mapping[str, bytes | Path] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecutionResult:
        """Run ``code`` once, in isolation, within ``timeout`` seconds (the default if ``None``).

        ``files`` are put into the program's work dir, read-only, before it starts.
        ``on_output`` is called with the program's output, in order, before this
        returns: as it is written where the sandbox sees it live, else when the
        program ended; either way its pieces add up to the result's text."""
        ...

    async def aclose(self) -> None:
        """Release everything the sandbox holds; waits for pending cleanup."""
        ...

    def close(self) -> None:
        """Blocking twin of :meth:`aclose`."""
        ...


@runtime_checkable
class RunningCommand(Protocol):
    """A command started beside a session's interpreter."""

    id: str

    def events(self) -> AsyncIterator[OutputEvent | CommandResult]:
        """Its output as it comes, then its :class:`CommandResult`."""
        ...

    async def wait(self) -> CommandResult:
        """Its result, once it has ended."""
        ...

    async def kill(self, number: int = ...) -> None:
        """Send a signal (SIGKILL by default) to every process of the command."""
        ...


@runtime_checkable
class SupportsSessions(Protocol):
    """A sandbox that can hold sessions (:class:`~sandcrew.sandbox.DockerSandbox` does)."""

    def session(
        self,
        language: str = "python",
        *,
        image: str | None = None,
        limits: SessionLimits | None = None,
    ) -> Session:
        """A new, not yet started session of ``language``."""
        ...


@runtime_checkable
class SandboxWithSessions(Sandbox, SupportsSessions, Protocol):
    """A :class:`Sandbox` that also holds sessions (:class:`~sandcrew.sandbox.DockerSandbox`)."""
