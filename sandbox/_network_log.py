"""What a run did on the network: one event per request through the host proxy."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class NetworkEvent(BaseModel):
    """One request (or ``CONNECT`` tunnel) of a run, allowed or denied, and why."""

    model_config = ConfigDict(frozen=True)

    host: str
    port: int
    method: str
    decision: Literal["allowed", "denied"]
    reason: str
    status: int | None = None
    """The HTTP status the program got (from the upstream, or the proxy's own refusal)."""
    bytes_sent: int = 0
    """Bytes from the program to the upstream (a tunnel's whole traffic, a request's body)."""
    bytes_received: int = 0
    duration: float = 0.0
    at: float = 0.0
    """Seconds from the start of the run's proxy channel to this request's start."""
    injected: tuple[str, ...] = ()
    """Names of the secret headers added (never their values)."""

    def describe(self) -> str:
        """One line for a person or a model: ``denied GET example.org:443: not on the list``."""
        status = "" if self.status is None else f" → {self.status}"
        injected = f" (+{', '.join(self.injected)})" if self.injected else ""
        return (
            f"{self.decision} {self.method} {self.host}:{self.port}{status}{injected}: "
            f"{self.reason}"
        )


class NetworkLog(BaseModel):
    """Every request of a run through the proxy, in the order they started, capped;
    ``dropped`` counts the rest."""

    model_config = ConfigDict(frozen=True)

    events: tuple[NetworkEvent, ...] = ()
    dropped: int = 0

    @property
    def denied(self) -> tuple[NetworkEvent, ...]:
        return tuple(event for event in self.events if event.decision == "denied")

    def runner_lines(self, limit: int = 8) -> list[str]:
        """``[network]`` and the requests, denied ones first (a model can react to why)."""
        if not self.events and not self.dropped:
            return []
        ordered = sorted(self.events, key=lambda event: event.decision != "denied")
        lines = ["[network]"] + [event.describe() for event in ordered[:limit]]
        left = max(len(ordered) - limit, 0) + self.dropped
        if left > 0:
            lines.append(f"[{left} more requests not shown]")
        return lines
