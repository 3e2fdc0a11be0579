"""One program in one launched container: deliver it, time it, collect what it did.

The deadline counts from the moment the program is sent, not from the
container's start: a pooled container may have waited for minutes. A host-side
timer kills the container at the deadline whatever the program prints.
Removing the container is the caller's business.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors

from ._bootstrap import ACKNOWLEDGEMENT, Delivery
from ._config import SandboxConfig
from ._container import LaunchedContainer, explain, translated, vanished
from ._errors import SandboxError
from ._result import TIMEOUT_EXIT_CODE, ExecutionResult
from ._streams import CappedBuffer, Demultiplexer, deliver_and_collect
from ._threads import call_soon, in_thread


@dataclass(frozen=True)
class Outcome:
    """What came back from the container, before it is judged."""

    stdout: CappedBuffer
    stderr: CappedBuffer
    status: int
    timed_out: bool
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
    loop = asyncio.get_running_loop()
    sent: asyncio.Future[float] = loop.create_future()

    def mark_sent() -> None:
        call_soon(loop, _settle, sent, loop.time())

    # One thread owns the attach connection from here to its closing, so no
    # cancellation can leak it: once the container is removed it ends anyway.
    collected = in_thread(_deliver_collect_wait, api, container, delivery, output_limit, mark_sent)
    kill: asyncio.Future[bool] | None = None

    def at_deadline() -> None:
        nonlocal kill
        kill = in_thread(_kill, api, container.container_id)

    timer: asyncio.TimerHandle | None = None
    try:
        first: set[asyncio.Future[Any]] = {sent, collected}
        await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
        if sent.done():
            timer = loop.call_at(sent.result() + time_limit, at_deadline)
        streams, status = await collected
        duration = loop.time() - sent.result()
    finally:
        collected.cancel()  # a no-op once done; otherwise nobody awaits it any more
        if timer is not None:
            timer.cancel()
    timed_out = await kill if kill is not None else False
    return Outcome(
        stdout=streams.stdout,
        stderr=streams.stderr,
        status=status,
        timed_out=timed_out,
        duration=duration,
        never_started=not streams.acknowledged and not streams.received and not timed_out,
    )


async def judge(
    api: docker.APIClient,
    config: SandboxConfig,
    container: LaunchedContainer,
    outcome: Outcome,
    *,
    language: str,
    time_limit: float,
) -> ExecutionResult:
    """Turn an outcome into the result; asks the engine about memory only for failures."""
    exit_code = outcome.status
    oom_killed = False
    if outcome.timed_out:
        exit_code = TIMEOUT_EXIT_CODE
    elif outcome.status != 0:
        state = await in_thread(
            translated(
                lambda: api.inspect_container(container.container_id)["State"],
                image=container.image,
            )
        )
        oom_killed = bool(state.get("OOMKilled", False))
    return ExecutionResult(
        language=language,
        exit_code=exit_code,
        stdout=outcome.stdout.text(),
        stderr=outcome.stderr.text(),
        timed_out=outcome.timed_out,
        oom_killed=oom_killed,
        stdout_truncated=outcome.stdout.truncated,
        stderr_truncated=outcome.stderr.truncated,
        duration=outcome.duration,
        image=container.image,
        run_id=container.run_id,
        timeout=time_limit,
        memory_limit_bytes=config.memory_bytes,
    )


def _settle(future: asyncio.Future[float], value: float) -> None:
    if not future.done():
        future.set_result(value)


def _deliver_collect_wait(
    api: docker.APIClient,
    container: LaunchedContainer,
    delivery: Delivery,
    limit: int,
    on_sent: Callable[[], None],
) -> tuple[Demultiplexer, int]:
    on_sent()
    streams = deliver_and_collect(
        container.connection,
        delivery.payload,
        limit=limit,
        acknowledgement=ACKNOWLEDGEMENT,
        trailer_mark=delivery.trailer_mark,
    )
    if streams.exit_status == 0:
        # A clean exit with all its output in: no need to wait for the teardown.
        return streams, 0
    # The streams end when the program's last process is gone; a program that
    # closed its stdout but lives on is waited for until the deadline kills it.
    try:
        status = api.wait(container.container_id, timeout=None)
    except docker.errors.NotFound:
        raise vanished() from None
    except docker.errors.APIError as exc:
        raise SandboxError(f"Docker failed while waiting for the program: {explain(exc)}") from None
    return streams, int(status.get("StatusCode", -1))


def _kill(api: docker.APIClient, container_id: str) -> bool:
    """SIGKILL the container; ``False`` when it had already ended on its own."""
    try:
        api.kill(container_id, signal="SIGKILL")
    except docker.errors.APIError:
        return False
    return True
