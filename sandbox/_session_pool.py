"""Started sessions kept ready, so that a new session costs no interpreter start.

A Python session's container and IPython take seconds to start; a pool starts
``size`` of them ahead and hands one out at once. Each serves one owner only
(a taken session is never returned to the pool), and the pool starts a
replacement in the background. A pooled session's idle timeout and lifetime
run while it waits: one that expired is skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Self

from ..core import UserError
from ._errors import SandboxError
from ._session_base import ClosedAtExit, Session


class SessionPool(ClosedAtExit):
    """``size`` started sessions from ``new_session`` (one language, image and limits),
    ready to be taken.

    ``async with SessionPool(sandbox.session, size=2) as pool: session = await pool.take()``
    (``lambda: sandbox.session(limits=...)`` for other limits); the taken session is the
    caller's to close. Leaving the block closes the sessions still waiting.
    """

    def __init__(self, new_session: Callable[[], Session], *, size: int = 1) -> None:
        if size < 1:
            raise UserError(f"a session pool holds at least one session (got size={size})")
        self._new = new_session
        self.size = size
        self._ready: asyncio.Queue[Session] = asyncio.Queue()
        self._starting: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def waiting(self) -> int:
        """Started sessions waiting to be taken."""
        return self._ready.qsize()

    def _refill(self) -> None:
        if self._closed:
            return
        task = asyncio.create_task(self._start_one())
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _start_one(self) -> None:
        session = self._new()
        try:
            await session.start()
        except SandboxError:
            return  # the next take starts one itself and reports why
        if self._closed:
            await session.close()
        else:
            self._ready.put_nowait(session)

    async def start(self) -> Self:
        """Start the pool's sessions and wait until they are ready."""
        await asyncio.gather(*(self._start_one() for _ in range(self.size)))
        return self

    async def take(self) -> Session:
        """A started session: a waiting one at once, or a new one if none is ready."""
        if self._closed:
            raise UserError("the session pool is closed")
        while not self._ready.empty():
            session = self._ready.get_nowait()
            self._refill()
            if not session.closed:
                return session
            await session.close()
        self._refill()
        return await self._new().start()

    async def close(self) -> None:
        """Close the waiting sessions and stop starting new ones."""
        self._closed = True
        for task in list(self._starting):
            with contextlib.suppress(asyncio.CancelledError, SandboxError):
                await task
        while not self._ready.empty():
            await self._ready.get_nowait().close()
