"""The sandboxes the E2B server holds: each one a sandcrew session, with its id, token and end.

A sandbox is a :class:`~sandcrew.sandbox.Session` (a hardened container, its work folder
``/home/user``) plus what E2B's API gives it: an id, an access token its sandbox-plane
requests carry, an end time that ``set_timeout`` and ``connect`` move (the sandbox is
killed then, its container removed), code contexts, and the commands started in it.
The server's caps: how many sandboxes at once, the longest timeout, the longest life.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import logging
import math
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sandcrew.e2b._errors import not_implemented
from sandcrew.sandbox import EgressPolicy, RunningCommand, Session, SessionLimits, SupportsSessions
from sandcrew.settings import E2bSettings

logger = logging.getLogger(__name__)

WORKDIR = "/home/user"
"""The sandbox's work folder, where E2B code expects it."""
DEFAULT_TEMPLATE = "code-interpreter-v1"
"""The template ``e2b_code_interpreter.Sandbox.create()`` asks for."""
TEMPLATE_ALIASES = frozenset({DEFAULT_TEMPLATE, "code-interpreter", "base", "python"})
"""Templates served, all by the one image the server chose (see :class:`Templates`)."""
DEFAULT_CONTEXT_ID = "default-python"
"""The id of the namespace cells run in when they name no context."""
MAX_CONTEXTS = 64
"""Code contexts a sandbox holds at most, its default one included."""
LIFETIME_SLACK = 60.0
_NETWORK_KEYS = frozenset({"allowOut", "denyOut"})
"""What a create's ``network`` may set here; the rest (rules, DNS servers, public traffic,
an egress proxy) is E2B's own."""
ALL_TRAFFIC = frozenset({"0.0.0.0/0", "::/0"})
"""``denyOut`` entries that say "everything": what a sandbox gets anyway."""
"""Seconds the session core's own lifetime exceeds the sandbox's: the server's timer kills
first; the core's limit is the backstop if it did not."""


class Refusal(Exception):
    """A request the server refuses; ``status`` is the HTTP status the SDK maps."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def not_found(sandbox_id: str) -> Refusal:
    # "was not found" is what the SDK reads as "the sandbox is gone" on the sandbox plane.
    return Refusal(404, f"The sandbox {sandbox_id} was not found")


@dataclass(frozen=True)
class Templates:
    """Which image serves E2B's templates: the data image when it is built, else python."""

    image: str
    served: frozenset[str] = TEMPLATE_ALIASES

    def image_for(self, template: str) -> str:
        if template not in self.served:
            raise Refusal(
                400,
                f"template {template!r} is not available: sandcrew e2b serves "
                f"{', '.join(sorted(self.served))} (all by the image {self.image})",
            )
        return self.image


@dataclass
class CodeContext:
    """A namespace of its own in the sandbox's interpreter."""

    id: str
    language: str = "python"
    cwd: str = WORKDIR

    def as_json(self) -> dict[str, str]:
        return {"id": self.id, "language": self.language, "cwd": self.cwd}


@dataclass(eq=False)
class HostedSandbox:
    """One sandbox: its session and what E2B says of it."""

    id: str
    token: str
    template: str
    session: Session
    started_at: datetime
    end_at: float
    """Unix time at which the sandbox is killed."""
    last_end: float
    """The latest end its life allows (``started_at`` + the server's longest life)."""
    metadata: dict[str, str] = field(default_factory=dict)
    env_vars: dict[str, str] = field(default_factory=dict)
    contexts: dict[str, CodeContext] = field(default_factory=dict)
    commands: dict[int, RunningCommand] = field(default_factory=dict)
    pids: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))
    timer: asyncio.TimerHandle | None = None

    def token_matches(self, offered: str | None) -> bool:
        return offered is not None and hmac.compare_digest(offered.encode(), self.token.encode())

    def remaining(self) -> float:
        return max(self.end_at - time.time(), 0.0)


class SandboxRegistry:
    """The server's sandboxes, by id; each one killed at its end, all at the server's stop."""

    def __init__(
        self,
        sandbox_for: Callable[[tuple[str, ...]], SupportsSessions],
        settings: E2bSettings,
        templates: Templates,
        session_limits: SessionLimits,
        *,
        ceiling: EgressPolicy | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._sandbox_for = sandbox_for
        self._ceiling = ceiling
        """The server's hosts (its ``--allow-host`` entries): what a sandbox may be given."""
        self._settings = settings
        self.templates = templates
        self._clock = clock
        self._session_limits = session_limits.model_copy(
            update={
                "cell_timeout": settings.max_cell_timeout,
                # The sandbox's timer ends it; the core's limits are only backstops.
                "idle_timeout": min(settings.max_lifetime + LIFETIME_SLACK, 86_400),
                "max_lifetime": settings.max_lifetime + LIFETIME_SLACK,
                "max_sessions": max(settings.max_sandboxes, session_limits.max_sessions),
            }
        )
        self._sandboxes: dict[str, HostedSandbox] = {}
        self._starting = 0
        self._closing = False

    def __len__(self) -> int:
        return len(self._sandboxes)

    def all(self) -> list[HostedSandbox]:
        self._forget_ended()
        return list(self._sandboxes.values())

    def timeout_of(self, requested: object) -> float:
        """A requested timeout (seconds), within the server's bounds."""
        if requested is None:
            return self._settings.default_timeout
        if isinstance(requested, bool) or not isinstance(requested, int | float):
            raise Refusal(400, f"timeout must be a number of seconds (got {requested!r})")
        # JSON lets through NaN, Infinity and integers too large for a float.
        if isinstance(requested, float) and not math.isfinite(requested):
            raise Refusal(400, f"timeout must be a finite number of seconds (got {requested})")
        if requested <= 0:
            raise Refusal(400, f"timeout must be > 0 seconds (got {requested})")
        if requested >= self._settings.max_timeout:
            return self._settings.max_timeout
        return float(requested)

    async def create(
        self,
        template: str,
        *,
        timeout: float,  # noqa: ASYNC109 - the sandbox's life, not this call's
        metadata: dict[str, str],
        env_vars: dict[str, str],
        hosts: tuple[str, ...] = (),
    ) -> HostedSandbox:
        if self._closing:
            raise Refusal(503, "the server is stopping")
        image = self.templates.image_for(template)
        self._forget_ended()
        held = len(self._sandboxes) + self._starting
        if held >= self._settings.max_sandboxes:
            raise Refusal(
                429,
                f"the server holds {held} sandboxes, its limit (e2b.max_sandboxes): kill one "
                "or wait for one to time out",
            )
        self._starting += 1
        try:
            sandbox = self._sandbox_for(hosts)
            session = sandbox.session("python", image=image, limits=self._session_limits)
            await session.start()
        finally:
            self._starting -= 1
        now = self._clock()
        hosted = HostedSandbox(
            id="i" + secrets.token_hex(10),
            token=secrets.token_urlsafe(24),
            template=template,
            session=session,
            started_at=datetime.fromtimestamp(now, UTC),
            end_at=now + timeout,
            last_end=now + self._settings.max_lifetime,
            metadata=metadata,
            env_vars=env_vars,
        )
        hosted.end_at = min(hosted.end_at, hosted.last_end)
        hosted.contexts[DEFAULT_CONTEXT_ID] = CodeContext(DEFAULT_CONTEXT_ID)
        if self._closing:
            await session.close()
            raise Refusal(503, "the server is stopping")
        self._sandboxes[hosted.id] = hosted
        self._schedule(hosted)
        return hosted

    def chosen_hosts(self, network: object) -> tuple[str, ...]:
        """The server's hosts that a create's ``network`` names in ``allowOut`` (an entry as
        the server wrote it, or its host): a ceiling narrowed, never widened. No
        ``network``: none (offline). Denying all traffic is what is done anyway."""
        if network is None:
            return ()
        if not isinstance(network, dict):
            raise Refusal(400, "network must be an object")
        unsupported = sorted(
            key for key, value in network.items() if value and key not in _NETWORK_KEYS
        )
        if unsupported:
            raise Refusal(501, not_implemented(f"network {', '.join(unsupported)}"))
        denied = network.get("denyOut") or []
        if not isinstance(denied, list) or not all(isinstance(item, str) for item in denied):
            raise Refusal(400, "network.denyOut must be a list of addresses")
        if not set(denied) <= ALL_TRAFFIC:
            raise Refusal(
                501,
                not_implemented(
                    "denyOut other than all traffic (everything off the allowed hosts is denied)"
                ),
            )
        asked = network.get("allowOut") or []
        if not isinstance(asked, list) or not all(isinstance(item, str) for item in asked):
            raise Refusal(400, "network.allowOut must be a list of host names")
        chosen: list[str] = []
        for item in asked:
            matching = () if self._ceiling is None else self._ceiling.entries_naming(item)
            if not matching:
                offered = (
                    ", ".join(self._ceiling.entries)
                    if self._ceiling is not None and self._ceiling.entries
                    else "none (start it with --allow-host)"
                )
                raise Refusal(403, f"this server does not allow {item!r} (it allows: {offered})")
            chosen.extend(matching)
        return tuple(dict.fromkeys(chosen))

    def get(self, sandbox_id: str) -> HostedSandbox:
        hosted = self._sandboxes.get(sandbox_id)
        if hosted is None or hosted.session.closed:
            self._forget_ended()
            raise not_found(sandbox_id)
        return hosted

    def set_timeout(self, hosted: HostedSandbox, timeout: float) -> None:
        """The sandbox ends ``timeout`` seconds from now (within its longest life)."""
        hosted.end_at = min(self._clock() + timeout, hosted.last_end)
        self._schedule(hosted)

    def new_context(self, hosted: HostedSandbox, *, cwd: str) -> CodeContext:
        if len(hosted.contexts) >= MAX_CONTEXTS:
            raise Refusal(
                429,
                f"a sandbox holds at most {MAX_CONTEXTS} code contexts (the default among them); "
                "remove one first",
            )
        context = CodeContext(str(uuid.uuid4()), cwd=cwd)
        hosted.contexts[context.id] = context
        return context

    async def kill(self, sandbox_id: str) -> bool:
        """Kill a sandbox and remove its container; False when there is none by that id."""
        hosted = self._sandboxes.pop(sandbox_id, None)
        if hosted is None:
            return False
        await self._end(hosted)
        return True

    async def aclose(self) -> None:
        """The server stops: kill every sandbox."""
        self._closing = True
        ending = list(self._sandboxes.values())
        self._sandboxes.clear()
        await asyncio.gather(*(self._end(hosted) for hosted in ending), return_exceptions=True)

    async def _end(self, hosted: HostedSandbox) -> None:
        if hosted.timer is not None:
            hosted.timer.cancel()
        for command in list(hosted.commands.values()):
            with contextlib.suppress(Exception):
                await command.kill()
        hosted.commands.clear()
        await hosted.session.close()

    def _schedule(self, hosted: HostedSandbox) -> None:
        if hosted.timer is not None:
            hosted.timer.cancel()
        loop = asyncio.get_running_loop()
        hosted.timer = loop.call_later(hosted.remaining(), self._expire, hosted.id)

    def _expire(self, sandbox_id: str) -> None:
        logger.info("sandbox %s reached its timeout: killing it", sandbox_id)
        task = asyncio.ensure_future(self.kill(sandbox_id))
        _background.add(task)
        task.add_done_callback(_background.discard)

    def _forget_ended(self) -> None:
        """Sandboxes whose session ended on its own (its container lost) are gone."""
        for key in [key for key, hosted in self._sandboxes.items() if hosted.session.closed]:
            hosted = self._sandboxes.pop(key)
            if hosted.timer is not None:
                hosted.timer.cancel()


_background: set[asyncio.Task[bool]] = set()
"""Kills the timers started, kept until they are done (the loop holds tasks weakly)."""
