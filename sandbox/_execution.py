"""One program in one launched container: deliver it, time it, collect what it did.

The deadline counts from the moment the program is sent, not from the
container's start: a pooled container may have waited for minutes. The worker
thread that delivers the program also arms the kill, so the deadline holds
even while the caller's event loop is blocked, whatever the program prints.
Removing the container is the caller's business.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import docker
import docker.errors

from ._bootstrap import ACKNOWLEDGEMENT, Delivery
from ._config import SandboxConfig
from ._container import LaunchedContainer, explain, vanished
from ._errors import SandboxError
from ._result import TIMEOUT_EXIT_CODE, ExecutionResult
from ._streams import CappedBuffer, deliver_and_collect
from ._threads import in_thread

# The status of a process ended by SIGKILL, which is what the kernel's OOM killer sends.
_KILLED_STATUS = 137


@dataclass(frozen=True)
class Outcome:
    """What came back from the container, before it is judged."""

    stdout: CappedBuffer
    stderr: CappedBuffer
    status: int
    timed_out: bool
    oom_killed: bool
    """SIGKILLed (or ended without a trailer) while the engine saw the memory limit hit."""
    duration: float
    never_started: bool
    """The container ended without a word before it read its program: nothing ran."""


async def execute(
    api: docker.APIClient,
    container: LaunchedContainer,
    delivery: Delivery,
    *,
    time_limit: float,
    output_limit: int,
) -> Outcome:
    """Send the program to the waiting bootstrap and collect its outcome."""
    # One thread owns the attach connection from here to its closing, so no
    # cancellation can leak it: once the container is removed it ends anyway.
    collected = in_thread(_run_program, api, container, delivery, time_limit, output_limit)
    try:
        return await collected
    finally:
        collected.cancel()  # a no-op once done; otherwise nobody awaits it any more


async def judge(
    config: SandboxConfig,
    container: LaunchedContainer,
    outcome: Outcome,
    *,
    language: str,
    time_limit: float,
) -> ExecutionResult:
    """Turn an outcome into the result."""
    return ExecutionResult(
        language=language,
        exit_code=TIMEOUT_EXIT_CODE if outcome.timed_out else outcome.status,
        stdout=outcome.stdout.text(),
        stderr=outcome.stderr.text(),
        timed_out=outcome.timed_out,
        oom_killed=outcome.oom_killed and not outcome.timed_out,
        stdout_truncated=outcome.stdout.truncated,
        stderr_truncated=outcome.stderr.truncated,
        duration=outcome.duration,
        image=container.image,
        run_id=container.run_id,
        timeout=time_limit,
        memory_limit_bytes=config.memory_bytes,
    )


class _Deadline:
    """A kill armed on a thread of its own: it fires even while the caller's loop is blocked.

    :meth:`disarm` returns only once a kill in progress is over, so
    :attr:`killed` is final afterwards; firing and disarming happen at most once.
    """

    def __init__(self, api: docker.APIClient, container_id: str, seconds: float) -> None:
        self._api = api
        self._container_id = container_id
        self._lock = threading.Lock()
        self._over = False
        self.killed = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.name = "sandcrew-deadline"
        self._timer.daemon = True

    def arm(self) -> None:
        self._timer.start()

    def disarm(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._over = True

    def _fire(self) -> None:
        with self._lock:
            if self._over:
                return
            self._over = True
            self.killed = _kill(self._api, self._container_id)


def _run_program(
    api: docker.APIClient,
    container: LaunchedContainer,
    delivery: Delivery,
    time_limit: float,
    limit: int,
) -> Outcome:
    deadline = _Deadline(api, container.container_id, time_limit)
    started = time.monotonic()
    deadline.arm()
    try:
        streams = deliver_and_collect(
            container.connection,
            delivery.payload,
            limit=limit,
            acknowledgement=ACKNOWLEDGEMENT,
            trailer_mark=delivery.trailer_mark,
        )
        # Both trailers in: the program has ended, whatever its leftovers do.
        if streams.exit_status is not None:
            deadline.disarm()
        duration = time.monotonic() - started
        status, oom_killed = streams.exit_status, False
        if status is None or status == _KILLED_STATUS:
            # No trailer: the stream ended with the container (killed, or its
            # shell died). A SIGKILL: the engine knows whether memory did it.
            status, oom_killed = _wait_for_end(api, container.container_id, status)
    finally:
        deadline.disarm()
    timed_out = deadline.killed and streams.exit_status is None
    return Outcome(
        stdout=streams.stdout,
        stderr=streams.stderr,
        status=status,
        timed_out=timed_out,
        oom_killed=oom_killed,
        duration=duration,
        never_started=not streams.acknowledged and not streams.received and not timed_out,
    )


def _wait_for_end(api: docker.APIClient, container_id: str, status: int | None) -> tuple[int, bool]:
    """The container's exit status (unless the trailer told) and whether it hit its memory limit."""
    try:
        ended = api.wait(container_id, timeout=None)
        state = api.inspect_container(container_id)["State"]
    except docker.errors.NotFound:
        raise vanished() from None
    except docker.errors.APIError as exc:
        raise SandboxError(f"Docker failed while waiting for the program: {explain(exc)}") from None
    if status is None:
        status = int(ended.get("StatusCode", -1))
    return status, bool(state.get("OOMKilled", False))


def _kill(api: docker.APIClient, container_id: str) -> bool:
    """SIGKILL the container; ``False`` when it had already ended on its own."""
    try:
        api.kill(container_id, signal="SIGKILL")
    except docker.errors.APIError:
        return False
    return True
