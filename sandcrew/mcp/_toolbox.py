"""What the MCP tools do: runs in throwaway containers under the server's limits, and the crew."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from sandcrew.agents import Message
from sandcrew.core import AsyncResource, UserError
from sandcrew.crew import CrewResult, CrewSettings, solve_task
from sandcrew.mcp._sessions import CONNECTIONLESS, ClientSessions
from sandcrew.mcp._tools import (
    MIB,
    Done,
    FileListing,
    FileResult,
    LanguagesResult,
    ServerLimits,
    SessionInfo,
    SessionList,
)
from sandcrew.sandbox import (
    CellResult,
    DockerSandbox,
    EgressPolicy,
    ExecutionResult,
    OutputEvent,
    Sandbox,
    SandboxConfig,
    SessionLimits,
)

P = ParamSpec("P")
R = TypeVar("R")

ProgressReporter = Callable[[str], Awaitable[None]]


@dataclass
class CallScope:
    """One tool call: how to report its progress, and the exception its work raised.

    The contracts turn a raised exception into a refusal text; the server needs the
    exception itself to tell a misuse (an MCP error) from an infrastructure failure.
    """

    report_progress: ProgressReporter | None = None
    raised: BaseException | None = None
    connection: object | None = None
    """The client connection the call came on (its sessions are closed when it ends)."""


CURRENT_CALL: contextvars.ContextVar[CallScope | None] = contextvars.ContextVar(
    "sandcrew_mcp_call", default=None
)


def _recorded(
    method: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    @functools.wraps(method)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(*args, **kwargs)
        except Exception as error:
            scope = CURRENT_CALL.get()
            if scope is not None:
                scope.raised = error
            raise

    return wrapper


class SandboxToolbox(AsyncResource):
    """Runs each call in a new hardened container, within limits no call can raise.

    The server's sandbox settings are the base of every run; a call may lower the
    timeout and the memory limit, and turn the network on only where the limits allow
    it (the tool schemas already refuse more). Runs are tasks of this toolbox, so that a
    client that goes away mid-run still has its containers removed by :meth:`aclose`.
    """

    def __init__(
        self,
        settings: CrewSettings,
        limits: ServerLimits,
        *,
        max_concurrent_runs: int = 8,
        sandbox_factory: Callable[[SandboxConfig], Sandbox] = DockerSandbox,
        session_limits: SessionLimits | None = None,
    ) -> None:
        self._settings = settings
        self._limits = limits
        self._sandbox_factory = sandbox_factory
        self._sandboxes: dict[tuple[int, bool, tuple[str, ...]], Sandbox] = {}
        self._runs: set[asyncio.Task[ExecutionResult]] = set()
        self._slots = asyncio.Semaphore(max_concurrent_runs)
        self._sessions = ClientSessions(
            lambda hosts: self._sandbox(limits.max_memory_bytes, False, hosts),
            limits,
            session_limits,
        )
        self._watched: list[object] = []

    async def start(self) -> None:
        """Nothing to start: a sandbox is made on its first run."""

    async def aclose(self) -> None:
        """Cancel the runs still going (their containers are removed), then close every sandbox."""
        runs = list(self._runs)
        for run in runs:
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
        await self._sessions.aclose()
        sandboxes, self._sandboxes = list(self._sandboxes.values()), {}
        for sandbox in sandboxes:
            await sandbox.aclose()

    def _sandbox(self, memory_bytes: int, network: bool, hosts: tuple[str, ...] = ()) -> Sandbox:
        """The sandbox for runs of these limits; ``hosts`` narrows the server's network
        policy (its ``--allow-host`` entries) to the ones a client named."""
        if network and hosts:
            raise UserError("network (all of it) and allow_hosts (a few hosts) exclude each other")
        key = (memory_bytes, network, hosts)
        sandbox = self._sandboxes.get(key)
        if sandbox is None:
            config = self._settings.sandbox.model_copy(
                update={
                    "memory_bytes": memory_bytes,
                    "network": network,
                    "egress": self._narrowed_policy(hosts),
                }
            )
            sandbox = self._sandboxes[key] = self._sandbox_factory(config)
        return sandbox

    def _narrowed_policy(self, hosts: tuple[str, ...]) -> EgressPolicy | None:
        ceiling = self._settings.sandbox.egress
        if not hosts:
            return None  # offline unless the client names hosts
        if ceiling is None:
            raise UserError("this server allows no hosts (start it with --allow-host)")
        try:
            return ceiling.narrowed(hosts)
        except ValueError as error:
            raise UserError(str(error)) from None

    @_recorded
    async def run_code(
        self,
        code: str,
        language: str,
        *,
        timeout: float | None,  # noqa: ASYNC109  (the program's limit, enforced by the sandbox)
        memory_bytes: int | None,
        network: bool,
        files: dict[str, str] | None = None,
        allow_hosts: tuple[str, ...] = (),
    ) -> ExecutionResult:
        limits = self._limits
        # The schemas refuse larger values; this keeps the limits true for direct callers too.
        time_limit = min(timeout or limits.max_timeout, limits.max_timeout)
        memory = min(memory_bytes or limits.max_memory_bytes, limits.max_memory_bytes)
        sandbox = self._sandbox(memory, network and limits.allow_network, allow_hosts)
        inputs = {name: _utf8(name, text) for name, text in (files or {}).items()}
        run = asyncio.ensure_future(
            self._run_in_slot(sandbox, code, language, time_limit, inputs, _output_reporter())
        )
        self._runs.add(run)
        run.add_done_callback(self._runs.discard)
        try:
            # Shielded so that a cancelled call cancels the run exactly once, and then
            # lets the sandbox remove the container before the call ends.
            return await asyncio.shield(run)
        except asyncio.CancelledError:
            run.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait({run})
            raise

    async def _run_in_slot(
        self,
        sandbox: Sandbox,
        code: str,
        language: str,
        timeout: float,  # noqa: ASYNC109
        files: dict[str, bytes],
        on_output: Callable[[OutputEvent], Awaitable[None]] | None,
    ) -> ExecutionResult:
        async with self._slots:
            return await sandbox.run(
                code, language, timeout=timeout, files=files or None, on_output=on_output
            )

    def list_languages(self) -> LanguagesResult:
        sandbox = self._sandbox(self._limits.max_memory_bytes, False)
        return LanguagesResult(
            languages=list(sandbox.supported_languages),
            default_language="python",
            max_timeout=self._limits.max_timeout,
            max_memory_mb=self._limits.max_memory_bytes // MIB,
            network_allowed=self._limits.allow_network,
            allowed_hosts=list(self._limits.allowed_hosts),
        )

    @_recorded
    async def solve(self, task: str) -> CrewResult:
        scope = CURRENT_CALL.get()
        report = None if scope is None else scope.report_progress

        async def on_message(message: Message) -> None:
            if report is not None:
                headline = message.content.strip().splitlines()[:1]
                await report(f"{message.sender}: {headline[0][:200] if headline else ''}")

        sandbox = self._sandbox(self._limits.max_memory_bytes, False)
        return await solve_task(task, self._settings, sandbox=sandbox, on_message=on_message)

    @_recorded
    async def session_create(
        self, language: str, *, allow_hosts: tuple[str, ...] = ()
    ) -> SessionInfo:
        owner = _owner()
        info = await self._sessions.create(owner, language, allow_hosts=allow_hosts)
        if owner is not CONNECTIONLESS and not any(seen is owner for seen in self._watched):
            # The connection's own teardown closes what its client left open.
            self._watched.append(owner)
            owner.exit_stack.push_async_callback(self._forget_owner, owner)  # type: ignore[attr-defined]
        return info

    async def _forget_owner(self, owner: object) -> None:
        self._watched = [seen for seen in self._watched if seen is not owner]
        await self._sessions.close_owner(owner)

    @_recorded
    async def session_run(
        self,
        session_id: str,
        code: str,
        *,
        timeout: float | None,  # noqa: ASYNC109  (the cell's limit, enforced by the session)
    ) -> CellResult:
        return await self._sessions.run(
            _owner(), session_id, code, timeout=timeout, report=_output_reporter()
        )

    @_recorded
    async def session_put_file(
        self, session_id: str, name: str, *, text: str | None, data_base64: str | None
    ) -> Done:
        return await self._sessions.put_file(
            _owner(), session_id, name, text=text, data_base64=data_base64
        )

    @_recorded
    async def session_get_file(self, session_id: str, name: str) -> FileResult:
        return await self._sessions.get_file(_owner(), session_id, name)

    @_recorded
    async def session_list_files(self, session_id: str, path: str) -> FileListing:
        return await self._sessions.list_files(_owner(), session_id, path)

    @_recorded
    async def session_close(self, session_id: str) -> Done:
        return await self._sessions.close(_owner(), session_id)

    def session_list(self) -> SessionList:
        return self._sessions.listing(_owner())


def _owner() -> object:
    scope = CURRENT_CALL.get()
    connection = None if scope is None else scope.connection
    return CONNECTIONLESS if connection is None else connection


def _output_reporter() -> Callable[[OutputEvent], Awaitable[None]] | None:
    """The program's output as progress messages (``stdout: ...``) of the current call.

    The output is capped before it gets here, so a flood costs the client no more
    than the result does.
    """
    scope = CURRENT_CALL.get()
    report = None if scope is None else scope.report_progress
    if report is None:
        return None

    async def report_output(chunk: OutputEvent) -> None:
        await report(f"{chunk.stream}: {chunk.text}")

    return report_output


def _utf8(name: str, text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise UserError(f"input file {name!r}: its content is not valid Unicode text") from None
