"""How much work the MCP server takes on: tool calls running or waiting, per client and in all.

A call past either bound is refused at once with a tool error that says which bound
and what to do, so that no client can queue unlimited work (nor spend the server's
model tokens through ``solve`` without end).
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict, Field

from sandcrew.settings import McpSettings

_MCP = McpSettings.model_fields


class QueueLimits(BaseModel):
    """Tool calls (``run_code``, ``solve``) running or waiting their turn that the server holds."""

    model_config = ConfigDict(frozen=True)

    per_client: int = Field(default=_MCP["max_pending_per_client"].default, ge=1)
    """Of one client (an MCP session over HTTP; the one client over stdio)."""
    total: int = Field(default=_MCP["max_pending"].default, ge=1)
    """Of every client together."""

    @classmethod
    def of(cls, settings: McpSettings) -> QueueLimits:
        return cls(per_client=settings.max_pending_per_client, total=settings.max_pending)


class QueueFull(Exception):
    """A call past the bounds; the message is for the client's model."""


class Admission:
    """Counts the calls each client has in the server and admits one only within the bounds."""

    def __init__(self, limits: QueueLimits) -> None:
        self._limits = limits
        self._pending: collections.Counter[str] = collections.Counter()

    @property
    def pending(self) -> int:
        return self._pending.total()

    @contextlib.contextmanager
    def admitted(self, client: str) -> Iterator[None]:
        """Hold a place for one call of ``client`` while it lasts; :class:`QueueFull` if none."""
        limits = self._limits
        if self._pending[client] >= limits.per_client:
            raise QueueFull(
                f"this client already has {limits.per_client} calls running or waiting, "
                "the most the server takes from one client: wait for one to finish"
            )
        if self.pending >= limits.total:
            raise QueueFull(
                f"the server already holds {limits.total} calls running or waiting, "
                "the most it takes: try again when one has finished"
            )
        self._pending[client] += 1
        try:
            yield
        finally:
            self._pending[client] -= 1
            if not self._pending[client]:
                del self._pending[client]
