"""Threads for blocking Docker calls that ``asyncio.to_thread`` does not fit.

Short engine calls (launch, removal, start, close) use ``asyncio.to_thread``.
Two kinds of work need something else, for measured reasons:

- Reading a program's streams blocks for as long as the program runs. On the
  loop's default executor (``min(32, cores + 4)`` threads: 6 on a 2-core
  machine) a seventh concurrent run would queue behind running programs, its
  deadline starting late, and the caller's own ``to_thread`` work would wait
  too. :func:`in_dedicated_thread` runs them on an executor of their own.
- Removals and pool fills must finish whatever happens to the event loop that
  asked for them (``run_sync`` gives every call a loop of its own and closes it),
  and ``close()`` must wait for all of them and report their errors:
  :class:`BackgroundWork` tracks them.
"""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from ..core import AsyncResource

_T = TypeVar("_T")

# Each concurrent run holds one; far more than a 2-core machine runs at once.
_RUN_THREADS = concurrent.futures.ThreadPoolExecutor(
    max_workers=256, thread_name_prefix="sandcrew-run"
)


def in_dedicated_thread(function: Callable[..., _T], *args: Any) -> asyncio.Future[_T]:
    """Run a call that blocks for a program's lifetime; awaitable, off the default executor."""
    return asyncio.get_running_loop().run_in_executor(_RUN_THREADS, function, *args)


async def finish_in_thread(close: Callable[[], _T]) -> _T:
    """Run a blocking ``close`` in a thread (its value returned); cancelling the caller still
    lets it finish."""
    closing = asyncio.ensure_future(asyncio.to_thread(close))
    try:
        return await asyncio.shield(closing)
    except asyncio.CancelledError:
        await asyncio.wait({closing})
        raise


class ClosedInThread(AsyncResource):
    """A resource whose :meth:`close` blocks (engine calls): :meth:`aclose` runs it in a
    thread that a cancelled caller still lets finish."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release everything held, waiting for it; closing twice is fine."""

    async def aclose(self) -> None:
        """:meth:`close` without blocking the event loop; cancelling it still lets it finish."""
        await finish_in_thread(self.close)


async def undone_if_cancelled(make: Callable[[], _T], undo: Callable[[_T], None]) -> _T:
    """``make()`` in a thread; if the caller is cancelled meanwhile, the thread still runs to its
    end and what it made is undone (``undo(made)``, in a thread) before the cancellation goes
    on, so a container being launched at that moment does not outlive the caller."""
    making = asyncio.ensure_future(asyncio.to_thread(make))
    try:
        return await asyncio.shield(making)
    except asyncio.CancelledError:
        await asyncio.wait({making})
        if not making.cancelled() and making.exception() is None:
            made = making.result()
            await finish_in_thread(lambda: undo(made))
        raise


class BackgroundWork:
    """Blocking work (container removals, pool fills) that must finish, whatever the loop does.

    Not bound to an event loop. :meth:`wait` blocks until all work submitted so
    far is done and raises the first error nobody saw.
    """

    def __init__(self, name: str) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=32, thread_name_prefix=name
        )
        self._lock = threading.Lock()
        self._pending: set[concurrent.futures.Future[None]] = set()
        self._errors: list[BaseException] = []

    def submit(self, work: Callable[[], None]) -> None:
        try:
            done = self._executor.submit(work)
        except RuntimeError:  # no new threads at interpreter shutdown: do it here
            self._run_inline(work)
            return
        with self._lock:
            self._pending.add(done)
        done.add_done_callback(self._settle)

    def _run_inline(self, work: Callable[[], None]) -> None:
        try:
            work()
        except BaseException as exc:
            with self._lock:
                self._errors.append(exc)

    def _settle(self, done: concurrent.futures.Future[None]) -> None:
        with self._lock:
            self._pending.discard(done)
            if not done.cancelled() and done.exception() is not None:
                self._errors.append(done.exception())  # type: ignore[arg-type]

    def wait(self) -> None:
        """Wait for every piece of work submitted so far; raise the first unseen error."""
        while True:
            with self._lock:
                pending = set(self._pending)
            if not pending:
                break
            concurrent.futures.wait(pending)
        with self._lock:
            errors, self._errors = self._errors, []
        if errors:
            raise errors[0]
