"""Threads for blocking Docker calls: awaitable one-off calls and tracked background work.

Docker SDK calls block, and some (attach, wait) block until a program ends, so
each gets a thread of its own rather than the loop's default executor: calls
that wait for programs must never starve the calls (kill, remove) that end them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")


def in_thread(function: Callable[..., _T], *args: Any) -> asyncio.Future[_T]:
    """Run a blocking call on a thread of its own and return an awaitable for its result."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()

    def deliver(outcome: Callable[[], None]) -> None:
        if not future.done():
            outcome()

    def work() -> None:
        try:
            result = function(*args)
        except BaseException as exc:  # handed to the awaiting task
            error = exc
            call_soon(loop, deliver, lambda: future.set_exception(error))
        else:
            call_soon(loop, deliver, lambda: future.set_result(result))

    threading.Thread(target=work, name="sandcrew-docker", daemon=True).start()
    return future


def call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[..., None], *args: Any) -> None:
    """Schedule ``callback`` on ``loop`` from any thread; a closed loop has no listener left."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback, *args)


class BackgroundWork:
    """Blocking work (container removals, pool fills) that must finish, whatever the loop does.

    Not bound to an event loop: ``run_sync`` gives every call a loop of its own,
    and the work outlives it. The threads are non-daemon, so even an
    interpreter that exits waits for them. :meth:`wait` blocks until all work
    submitted so far is done and raises the first error nobody saw.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._pending: set[concurrent.futures.Future[None]] = set()
        self._errors: list[BaseException] = []

    def submit(self, work: Callable[[], None]) -> concurrent.futures.Future[None]:
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def body() -> None:
            try:
                work()
            except BaseException as exc:
                with self._lock:
                    self._errors.append(exc)
                done.set_exception(exc)
            else:
                done.set_result(None)
            finally:
                with self._lock:
                    self._pending.discard(done)

        with self._lock:
            self._pending.add(done)
        try:
            threading.Thread(target=body, name=self._name).start()
        except RuntimeError:
            body()  # no new threads at interpreter shutdown: do it here
        return done

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
