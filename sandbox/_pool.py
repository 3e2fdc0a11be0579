"""A pool of pre-started, never-used containers of one image; each serves exactly one run.

Start-up (create, attach, start: most of a cold run's time) happens ahead of
the run. A run takes a waiting container, sends its program, and the container
is removed afterwards like any other: nothing is ever reused, so no state can
pass from one run to the next. Every take starts a refill in the background; a
run waits only when no container is ready, and then for the first one that
becomes ready (already on its way, or launched for it).

Lifetimes (the arithmetic is in :mod:`._deadlines`). The reaper removes any
container past its deadline label, whoever owns it, so a waiting container's
label allows for twice its idle lifetime plus the run timeout and the reap
grace. The pool replaces containers that waited
longer than their idle lifetime, hands out only containers whose label leaves
room for the run's whole time limit, and drops containers that ended while they
waited (the attach stream shows their end). The work dir and /tmp are the
container's own tmpfs, fresh for each container; the deadline counts from the
moment the program is sent.

Thread-based and loop-agnostic: ``run_sync`` gives every call a loop of its own,
and the pool outlives them all.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections import deque
from collections.abc import Callable

from ..core import UserError
from ._container import LaunchedContainer
from ._deadlines import (
    longest_pooled_run,
    pool_check_interval,
    pool_member_lifetime,
    pooled_member_fits,
)
from ._streams import connection_is_quiet
from ._threads import BackgroundWork

Claim = concurrent.futures.Future[LaunchedContainer]


class ContainerPool:
    """Keeps ``size`` started containers of one image ready; hands each out once.

    ``launch(deadline)`` blocks until a container is started (cleaning up after
    itself if it fails); ``discard(container)`` arranges its removal without
    blocking. Fills run on ``background``.
    """

    def __init__(
        self,
        *,
        size: int,
        idle_seconds: float,
        run_timeout: float,
        reap_grace: float,
        launch: Callable[[float], LaunchedContainer],
        discard: Callable[[LaunchedContainer], None],
        background: BackgroundWork,
    ) -> None:
        self._size = size
        self._idle_seconds = idle_seconds
        self._reap_grace = reap_grace
        self._lifetime = pool_member_lifetime(idle_seconds, run_timeout, reap_grace)
        self._longest_run = longest_pooled_run(idle_seconds, run_timeout)
        self._launch = launch
        self._discard = discard
        self._background = background
        # Reentrant: a fill may run inline when no thread can be started.
        self._changed = threading.Condition(threading.RLock())
        self._idle: deque[LaunchedContainer] = deque()
        self._waiters: deque[tuple[Claim, float]] = deque()
        self._filling = 0
        self._failed = False
        self._closed = False

    def start(self) -> None:
        """Launch the first members and the keeper that retires old ones."""
        with self._changed:
            self._top_up()
        threading.Thread(target=self._keep, name="sandcrew-pool", daemon=True).start()

    def wait_until_filled(self, timeout: float | None = None) -> None:
        """Block until no launch is in flight (the pool is full, or a launch failed)."""
        with self._changed:
            self._changed.wait_for(lambda: self._filling == 0, timeout)

    async def take(self, time_limit: float) -> LaunchedContainer | None:
        """A started, never-used container, or ``None`` when the pool cannot serve this run.

        Raises what launching a container raised when the pool could not make
        one for this run (a missing image, say).
        """
        claim = self._claim(time_limit)
        if claim is None:
            return None
        try:
            return await asyncio.wrap_future(claim)
        except asyncio.CancelledError:
            # Handed over meanwhile or not: a container the run never used goes back.
            claim.cancel()
            claim.add_done_callback(self._give_back)
            raise

    def refuse_runs(self) -> None:
        """Hand out no more containers and launch none; :meth:`close` still removes them."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def close(self) -> None:
        """Discard every waiting container; wait for launches in flight and discard theirs."""
        with self._changed:
            self._closed = True
            while self._idle:
                self._discard(self._idle.popleft())
            while self._waiters:
                claim, _ = self._waiters.popleft()
                if claim.set_running_or_notify_cancel():
                    claim.set_exception(
                        UserError("The sandbox was closed while a run waited for a container")
                    )
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._filling == 0)

    # --- under the lock ---------------------------------------------------------------

    def _claim(self, time_limit: float) -> Claim | None:
        with self._changed:
            if self._closed or time_limit > self._longest_run:
                return None
            claim: Claim = concurrent.futures.Future()
            while self._idle:
                member = self._idle.popleft()
                if self._usable(member, time_limit):
                    claim.set_result(member)
                    break
                self._discard(member)
            else:
                self._waiters.append((claim, time_limit))
            self._top_up()
            return claim

    def _offer(self, member: LaunchedContainer) -> None:
        """Hand a ready container to the oldest waiting run, or keep it."""
        if self._closed or not self._usable(member, 0.0):
            self._discard(member)
            return
        while self._waiters:
            claim, time_limit = self._waiters[0]
            if claim.cancelled():
                self._waiters.popleft()
                continue
            if not self._usable(member, time_limit):
                break
            self._waiters.popleft()
            if claim.set_running_or_notify_cancel():
                claim.set_result(member)
                return
        self._idle.append(member)

    def _usable(self, member: LaunchedContainer, time_limit: float) -> bool:
        fits = pooled_member_fits(
            now=time.time(),
            waited=time.monotonic() - member.launched_at,
            idle_seconds=self._idle_seconds,
            label_deadline=member.deadline,
            limit=time_limit,
            reap_grace=self._reap_grace,
        )
        return fits and connection_is_quiet(member.connection)

    def _top_up(self) -> None:
        """Launch as many containers as are missing for the pool and the waiting runs."""
        if self._closed:
            return
        self._waiters = deque(waiter for waiter in self._waiters if not waiter[0].cancelled())
        wanted = len(self._waiters) + (0 if self._failed else self._size)
        for _ in range(wanted - len(self._idle) - self._filling):
            self._filling += 1
            self._background.submit(self._fill)

    # --- on other threads ----------------------------------------------------------------

    def _fill(self) -> None:
        try:
            member = self._launch(time.time() + self._lifetime)
        except Exception as exc:
            with self._changed:
                self._filling -= 1
                self._fail(exc)
                self._top_up()
                self._changed.notify_all()
            return
        with self._changed:
            self._filling -= 1
            self._failed = False
            self._offer(member)
            self._top_up()
            self._changed.notify_all()

    def _fail(self, error: Exception) -> None:
        """Give a launch failure to the oldest waiting run; refill only for waiting runs."""
        self._failed = True
        while self._waiters:
            claim, _ = self._waiters.popleft()
            if claim.set_running_or_notify_cancel():
                claim.set_exception(error)
                return

    def _give_back(self, claim: Claim) -> None:
        if claim.cancelled() or claim.exception() is not None:
            return
        with self._changed:
            self._offer(claim.result())
            self._top_up()

    def _keep(self) -> None:
        """Retire containers that waited too long or ended, well before their deadline label."""
        interval = pool_check_interval(self._idle_seconds)
        with self._changed:
            while not self._closed:
                self._changed.wait(interval)
                if self._closed:
                    return
                for member in list(self._idle):
                    if not self._usable(member, 0.0):
                        self._idle.remove(member)
                        self._discard(member)
                self._top_up()
