"""One program in one launched container: deliver it, time it, collect what it did.

The deadline counts from the moment the supervisor acknowledges the program
(the program starts right after; until then, the supervisor's own start-up
gets a short allowance), not from the container's start: a pooled container
may have waited for minutes. The supervisor ends the program at the deadline
and still sends what it left in ``out/``; the host's kill comes
:data:`~._deadlines.END_OF_RUN_ALLOWANCE` later, in case the supervisor could
not report. The worker
thread that delivers the program also arms that kill, so it holds
even while the caller's event loop is blocked, whatever the program prints.
It is disarmed only by the supervisor's trailers (which the program cannot
forge) or by the engine's confirmation that the container stopped; every wait
on the stream or the engine is bounded (see :mod:`._deadlines`). Removing the
container is the caller's business.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import docker
import docker.errors
import requests

from ._config import SandboxConfig
from ._container import LaunchedContainer, explain, vanished
from ._deadlines import (
    END_OF_RUN_ALLOWANCE,
    ENGINE_CONFIRMATION_SECONDS,
    SUPERVISOR_START_ALLOWANCE,
    reading_ends_after,
)
from ._errors import SandboxError
from ._files import parse_artifacts
from ._result import TIMEOUT_EXIT_CODE, ExecutionResult
from ._streams import CappedBuffer, StreamName, deliver_and_collect, shutdown_connection
from ._supervisor import ACKNOWLEDGEMENT, Delivery
from ._threads import in_dedicated_thread

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
    artifacts: CappedBuffer | None = None
    """The supervisor's artifacts frame, when the run had an output folder."""
    artifacts_cut: bool = False
    """The stream ended (the container was killed) in the middle of that frame."""


async def execute(
    api: docker.APIClient,
    container: LaunchedContainer,
    delivery: Delivery,
    *,
    time_limit: float,
    output_limit: int,
    artifact_limit: int = 0,
    on_output: Callable[[StreamName, bytes], None] | None = None,
) -> Outcome:
    """Send the program to the waiting supervisor and collect its outcome.

    ``on_output`` is told the output as it comes, on the reading thread.
    """
    # One thread owns the attach connection from here to its closing. On
    # cancellation the socket is shut down, which ends the thread's reading,
    # and the thread is awaited: only then may the connection be closed.
    abandoned = threading.Event()
    collected = in_dedicated_thread(
        _run_program,
        api,
        container,
        delivery,
        time_limit,
        output_limit,
        artifact_limit,
        abandoned,
        on_output,
    )
    try:
        return await asyncio.shield(collected)
    except asyncio.CancelledError:
        abandoned.set()
        shutdown_connection(container.connection)
        await asyncio.wait({collected})
        raise


async def judge(
    config: SandboxConfig,
    container: LaunchedContainer,
    outcome: Outcome,
    *,
    language: str,
    time_limit: float,
) -> ExecutionResult:
    """Turn an outcome into the result."""
    frame = outcome.artifacts
    artifacts, artifacts_truncated, skipped = parse_artifacts(
        bytes(frame.data) if frame is not None else b"",
        received_all=frame is None or not frame.truncated,
        cut=outcome.artifacts_cut,
    )
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
        artifacts=tuple(artifacts),
        artifacts_truncated=artifacts_truncated,
        artifacts_skipped=tuple(skipped),
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
        self._fires_at = time.monotonic() + seconds
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.name = "sandcrew-deadline"
        self._timer.daemon = True

    def arm(self) -> None:
        self._timer.start()

    def restart(self, seconds: float) -> None:
        """Fire ``seconds`` from now instead (unless it already fired or was disarmed)."""
        with self._lock:
            if self._over:
                return
            self._timer.cancel()
            self._fires_at = time.monotonic() + seconds
            self._timer = threading.Timer(seconds, self._fire)
            self._timer.name = "sandcrew-deadline"
            self._timer.daemon = True
            self._timer.start()

    def remaining(self) -> float:
        return max(0.0, self._fires_at - time.monotonic())

    def disarm(self) -> None:
        with self._lock:
            self._timer.cancel()
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
    artifact_limit: int,
    abandoned: threading.Event,
    on_output: Callable[[StreamName, bytes], None] | None = None,
) -> Outcome:
    # Until the supervisor acknowledges the program, its own start-up may take
    # a moment (a cold container); from then on the program has its limit, which the
    # supervisor enforces itself (it then still sends the program's artifacts). The host's
    # kill comes only if the supervisor has not reported shortly after the limit.
    deadline = _Deadline(api, container.container_id, time_limit + SUPERVISOR_START_ALLOWANCE)
    started = [time.monotonic()]

    def program_starts() -> None:
        started[0] = time.monotonic()
        deadline.restart(time_limit + END_OF_RUN_ALLOWANCE)

    deadline.arm()
    try:
        streams = deliver_and_collect(
            container.connection,
            delivery.payload,
            limit=limit,
            acknowledgement=ACKNOWLEDGEMENT,
            trailer_mark=delivery.trailer_mark,
            read_for=reading_ends_after(time_limit),
            on_acknowledged=program_starts,
            artifact_limit=artifact_limit,
            on_output=on_output,
        )
        duration = time.monotonic() - started[0]
        status, oom_killed = streams.exit_status, False
        if abandoned.is_set():
            status = -1  # nobody waits for this outcome; the container is being removed
        elif status is None or (status == _KILLED_STATUS and not streams.timed_out):
            # No trailer: the container ended (killed, or its supervisor died),
            # or the reading gave up. A SIGKILL: the engine knows whether memory
            # did it. Either way the deadline stays armed until the engine
            # confirms the container stopped.
            status, oom_killed = _wait_for_end(api, container.container_id, deadline, status)
        # Only the supervisor knows the nonce: both trailers in means the program
        # ended on its own and nothing it left is running any more.
    finally:
        deadline.disarm()
    timed_out = streams.timed_out or (deadline.killed and streams.exit_status is None)
    if streams.timed_out:
        # The supervisor's clock started at its acknowledgement, a moment before the host
        # read it: the program had its whole limit.
        duration = max(duration, time_limit)
    return Outcome(
        stdout=streams.stdout,
        stderr=streams.stderr,
        status=status,
        timed_out=timed_out,
        oom_killed=oom_killed,
        duration=duration,
        never_started=not streams.acknowledged and not streams.received and not timed_out,
        artifacts=streams.artifacts,
        artifacts_cut=streams.artifacts_cut,
    )


def _wait_for_end(
    api: docker.APIClient, container_id: str, deadline: _Deadline, status: int | None
) -> tuple[int, bool]:
    """The container's exit status (unless the trailer told) and whether it hit its memory limit.

    Waits at most until the deadline's kill plus the engine's confirmation time;
    if the engine has not confirmed the end by then, kills once more and waits
    once more, then gives up with a :class:`SandboxError`.
    """
    ended_with: int | None = None
    for budget in (deadline.remaining() + ENGINE_CONFIRMATION_SECONDS, ENGINE_CONFIRMATION_SECONDS):
        try:
            ended = api.wait(container_id, timeout=math.ceil(budget))
            ended_with = int(ended.get("StatusCode", -1))
            state = api.inspect_container(container_id)["State"]
        except docker.errors.NotFound:
            raise vanished() from None
        except docker.errors.APIError as exc:
            raise SandboxError(
                f"Docker failed while waiting for the program: {explain(exc)}"
            ) from None
        except (requests.exceptions.RequestException, OSError):
            _kill(api, container_id)
            continue
        break
    if ended_with is None:
        raise SandboxError(
            f"Docker did not confirm that the sandbox container {container_id[:12]} stopped "
            "after it was killed; `sandcrew sandbox gc` removes it",
            retryable=True,
        )
    if status is None:
        status = ended_with
    return status, bool(state.get("OOMKilled", False))


def _kill(api: docker.APIClient, container_id: str) -> bool:
    """SIGKILL the container; ``False`` when it had already ended on its own."""
    try:
        api.kill(container_id, signal="SIGKILL")
    except docker.errors.APIError:
        return False
    except (requests.exceptions.RequestException, OSError):
        return False
    return True
