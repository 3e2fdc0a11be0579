"""The sessions MCP clients hold: each owned by one client connection, closed when it ends.

A client addresses a session by the id :meth:`ClientSessions.create` gave it; the id of
another client's session is unknown to it. The caps are the server's: sessions per
client (a refusal past it), and each session's idle timeout and lifetime (the session
core closes it then, and removes its container). Everything a client left open is
closed when its connection ends, and all of it when the server stops.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from sandcrew.core import UserError
from sandcrew.errors import SessionLimitError
from sandcrew.mcp._tools import (
    Done,
    FileListing,
    FileResult,
    ServerLimits,
    SessionInfo,
    SessionList,
)
from sandcrew.sandbox import (
    CellResult,
    OutputEvent,
    Sandbox,
    Session,
    SessionLimits,
    SupportsSessions,
)

OutputReporter = Callable[[OutputEvent], Awaitable[None]]

CONNECTIONLESS = object()
"""The owner of sessions made by calls that came on no connection of their own: the stateless
form of the protocol (2026-07-28), and direct callers of the toolbox. Their sessions are
reached by id alone (unguessable, as a capability is), count together against the server's
cap, and live until ``session_close``, their idle timeout or lifetime, or the server's stop."""


@dataclass
class _Entry:
    session: Session
    owner: object
    cells: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class ClientSessions:
    """Sessions of the server's clients, keyed by an id and owned by a connection."""

    def __init__(
        self,
        sandbox: Callable[[tuple[str, ...]], Sandbox],
        limits: ServerLimits,
        session_limits: SessionLimits | None = None,
    ) -> None:
        self._sandbox = sandbox
        self._limits = limits
        caps = limits.sessions
        # The [sessions] table, with what the server decides: its ceilings and its caps (the
        # total of all clients is the process's session cap).
        self._session_limits = (session_limits or SessionLimits()).model_copy(
            update={
                "cell_timeout": limits.max_timeout,
                "idle_timeout": caps.session_idle_timeout,
                "max_lifetime": caps.session_lifetime,
                "max_file_bytes": caps.max_file_bytes,
                "max_sessions": caps.max_sessions_total,
            }
        )
        self._entries: dict[str, _Entry] = {}
        self._closing = False

    def _of(self, owner: object) -> dict[str, _Entry]:
        self._forget_closed()
        return {key: entry for key, entry in self._entries.items() if entry.owner is owner}

    def _forget_closed(self) -> None:
        """Sessions the core closed (idle, lifetime, container lost) are gone for clients too."""
        for key in [key for key, entry in self._entries.items() if entry.session.closed]:
            del self._entries[key]

    def _entry(self, owner: object, session_id: str) -> _Entry:
        entry = self._entries.get(session_id)
        if entry is None or entry.owner is not owner or entry.session.closed:
            self._forget_closed()
            ids = ", ".join(self._of(owner)) or "none"
            raise UserError(
                f"no open session {session_id!r} (this client's sessions: {ids}); "
                "it may have expired; session_create starts a new one"
            )
        return entry

    def _info(self, key: str, entry: _Entry) -> SessionInfo:
        limits = entry.session.limits
        return SessionInfo(
            session_id=key,
            language=entry.session.language,
            cells=entry.cells,
            cell_timeout=limits.cell_timeout,
            idle_timeout=limits.idle_timeout,
            lifetime=limits.max_lifetime,
        )

    async def create(
        self, owner: object, language: str, *, allow_hosts: tuple[str, ...] = ()
    ) -> SessionInfo:
        if self._closing:
            raise UserError("the server is stopping; no new sessions")
        held = self._of(owner)
        if len(held) >= self._limits.sessions.max_sessions:
            raise UserError(
                f"this client already holds {len(held)} sessions, the server's limit; "
                f"close one with session_close (open: {', '.join(held)})"
            )
        sandbox = self._sandbox(allow_hosts)
        if not isinstance(sandbox, SupportsSessions):
            raise UserError("this server's sandbox holds no sessions; use run_code")
        session = sandbox.session(language, limits=self._session_limits)
        try:
            await session.start()
        except SessionLimitError:
            raise UserError(
                f"the server holds {self._session_limits.max_sessions} sessions for all its "
                "clients, its limit: close one of yours with session_close, or try again later"
            ) from None
        key = secrets.token_hex(8)
        entry = self._entries[key] = _Entry(session, owner)
        return self._info(key, entry)

    async def run(
        self,
        owner: object,
        session_id: str,
        code: str,
        *,
        timeout: float | None,  # noqa: ASYNC109  (the cell's limit, enforced by the session)
        report: OutputReporter | None,
    ) -> CellResult:
        entry = self._entry(owner, session_id)
        time_limit = min(timeout or self._limits.max_timeout, self._limits.max_timeout)
        result: CellResult | None = None
        async with entry.lock:
            async for event in entry.session.stream(code, timeout=time_limit):
                if isinstance(event, CellResult):
                    result = event
                elif isinstance(event, OutputEvent) and report is not None:
                    await report(event)
            entry.cells += 1
        assert result is not None
        return result

    async def put_file(
        self,
        owner: object,
        session_id: str,
        name: str,
        *,
        text: str | None,
        data_base64: str | None,
    ) -> Done:
        if (text is None) == (data_base64 is None):
            raise UserError("give the file's content as text or as data_base64 (exactly one)")
        if text is not None:
            try:
                content = text.encode()
            except UnicodeEncodeError:
                raise UserError(f"the text of {name!r} is not valid Unicode") from None
        else:
            assert data_base64 is not None
            try:
                content = base64.b64decode(data_base64, validate=True)
            except (binascii.Error, ValueError):
                raise UserError(f"data_base64 of {name!r} is not valid base64") from None
        await self._entry(owner, session_id).session.put_file(name, content)
        return Done()

    async def get_file(self, owner: object, session_id: str, name: str) -> FileResult:
        largest = self._limits.sessions.max_file_bytes
        data = await self._entry(owner, session_id).session.get_file(name, max_bytes=largest)
        try:
            return FileResult(name=name, size=len(data), text=data.decode(), data_base64=None)
        except UnicodeDecodeError:
            encoded = base64.b64encode(data).decode()
            return FileResult(name=name, size=len(data), text=None, data_base64=encoded)

    async def list_files(self, owner: object, session_id: str, path: str) -> FileListing:
        entries = await self._entry(owner, session_id).session.list_files(path)
        return FileListing(path=path, entries=entries)

    async def close(self, owner: object, session_id: str) -> Done:
        entry = self._entry(owner, session_id)
        del self._entries[session_id]
        await entry.session.close()
        return Done()

    def listing(self, owner: object) -> SessionList:
        if owner is CONNECTIONLESS:
            # Other clients' sessions share this owner: their ids are not to be shown.
            raise UserError(
                "session_list needs a client connection of its own: calls in the stateless "
                "form of the protocol (2026-07-28) reach a session only by the id "
                "session_create returned"
            )
        return SessionList(
            sessions=[self._info(key, entry) for key, entry in self._of(owner).items()],
            max_sessions=self._limits.sessions.max_sessions,
        )

    async def close_owner(self, owner: object) -> None:
        """The client's connection ended: close everything it left open."""
        await self._close([key for key, entry in self._entries.items() if entry.owner is owner])

    async def aclose(self) -> None:
        """The server stops: close every session."""
        self._closing = True
        await self._close(list(self._entries))

    async def _close(self, keys: list[str]) -> None:
        sessions = [self._entries.pop(key).session for key in keys if key in self._entries]
        await asyncio.gather(*(session.close() for session in sessions), return_exceptions=True)


def owner_of(context: Any) -> object | None:
    """The client connection a request came on, or ``None`` when it has none of its own.

    The SDK's low-level handlers get the connection only through their session
    (``ServerSession._connection``); its per-connection teardown (``exit_stack``) is
    where a client's sessions are closed when it goes away. A request in the stateless
    form of the protocol (2026-07-28) gets a connection that ends with the request: its
    sessions must outlive it, so it counts as no connection (:data:`CONNECTIONLESS`).
    """
    connection = getattr(getattr(context, "session", None), "_connection", None)
    if not hasattr(connection, "exit_stack"):
        return None
    if getattr(connection, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
        return None
    return connection
