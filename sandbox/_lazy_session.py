"""One session of a sandbox, opened at its first use and closed with its owner.

The crew (``solve --session``), the AutoGen and AG2 executors and the REPL each
keep one live interpreter for as long as they live: :class:`LazySession` is how.
It starts the sandbox and the session at the first cell, refuses to start a
second one silently when the first has ended (its variables would be gone), and
closes the session, then the sandbox.
"""

from __future__ import annotations

from ._errors import SessionClosedError
from ._live import OutputCallback
from ._protocol import SandboxWithSessions
from ._session_base import Session
from ._session_models import CellResult, SessionLimits


class LazySession:
    """A session of ``sandbox``, started at the first call that needs it."""

    def __init__(
        self,
        sandbox: SandboxWithSessions,
        language: str = "python",
        *,
        image: str | None = None,
        limits: SessionLimits | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.language = language
        self.image = image
        self.limits = limits
        self._session: Session | None = None

    @property
    def current(self) -> Session | None:
        """The session, once started (it may have ended since)."""
        return self._session

    async def open(self) -> Session:
        """The started session; started now if this is the first call."""
        if self._session is not None:
            if self._session.closed:
                raise SessionClosedError(
                    "the session has ended (closed, idle or lifetime limit, or its container "
                    "was lost), and its variables with it; start again"
                )
            return self._session
        await self.sandbox.start()
        session = self.sandbox.session(self.language, image=self.image, limits=self.limits)
        await session.start()
        self._session = session
        return session

    async def run(
        self,
        code: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the cell's own limit
        on_output: OutputCallback | None = None,
    ) -> CellResult:
        """Run ``code`` as the session's next cell."""
        session = await self.open()
        return await session.run(code, timeout=timeout, on_output=on_output)

    async def restart(self) -> None:
        """A fresh interpreter (files stay); a new session when the last one has ended."""
        if self._session is None or self._session.closed:
            self._session = None
            await self.open()
        else:
            await self._session.restart()

    async def aclose(self) -> None:
        """Close the session (its container removed), then the sandbox."""
        session, self._session = self._session, None
        try:
            if session is not None:
                await session.close()
        finally:
            await self.sandbox.aclose()
