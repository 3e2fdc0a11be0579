"""Every deadline of a run, in one place: where "when does this end?" is decided.

A run has four clocks, all derived here from the run's time limit and the
sandbox settings:

- the **run limit**: the program's wall-clock seconds, counted from the moment
  the supervisor acknowledges the program (:func:`run_limit`); the supervisor
  kills the program then, collects what it left in ``out/`` (for at most
  :data:`ARTIFACT_COLLECTION_SECONDS`) and reports the timeout. The host kills
  the container :data:`END_OF_RUN_ALLOWANCE` later if the supervisor has not
  reported by then. Before the acknowledgement the supervisor's own start-up
  gets :data:`SUPERVISOR_START_ALLOWANCE` on top;
- the **watchdog**: the in-container supervisor ends the container this much
  later (:data:`WATCHDOG_GRACE`), so a crashed or hung host leaves it running
  for at most a few seconds more (:func:`watchdog_seconds`);
- the **host's read and confirmation bounds**: how long the host reads the
  program's streams and waits for the engine to confirm that the container has
  stopped before it kills again and gives up (:func:`reading_ends_after`,
  :data:`ENGINE_CONFIRMATION_SECONDS`);
- the **reaper label**: the unix time after which any sandcrew process may
  remove the container, whoever owns it (:func:`cold_label_deadline`), and
  the longer one of a pooled container that may wait before its run
  (:func:`pool_member_lifetime`, :func:`longest_pooled_run`,
  :func:`pooled_member_fits`).
"""

from __future__ import annotations

import math

from ..core import ConfigurationError

# Defined with the collector that keeps it; listed here with the run's other clocks.
from ._inside.files import ARTIFACT_COLLECTION_SECONDS as ARTIFACT_COLLECTION_SECONDS

END_OF_RUN_ALLOWANCE = 3.0
"""Seconds past the run limit the host gives the supervisor to end the program, collect
its artifacts and report, before the host kills the container itself."""

WATCHDOG_GRACE = 5.0
"""Seconds past the run limit after which the container's supervisor ends the container."""

SUPERVISOR_START_ALLOWANCE = 5.0
"""Seconds a cold container's supervisor may take to acknowledge its program."""

ENGINE_CONFIRMATION_SECONDS = 10.0
"""Seconds the host waits for the engine to confirm a container stopped after its kill."""

LONGEST_RUN_LIMIT = 86_400.0
"""A run limit longer than a day is a mistake (and past what timers can hold)."""
SHORTEST_RUN_LIMIT = 0.1
"""Seconds: below this no interpreter even starts, so a smaller limit is a mistake, not a limit."""

POOL_CHECK_INTERVAL_LIMIT = 30.0
"""Waiting pool members are checked for age and death at least this often."""


def run_limit(default: float, override: float | None) -> float:
    """The run's time limit: the override, else the configured default."""
    limit = default if override is None else override
    problem = limit_problem(limit)
    if problem is not None:
        raise ConfigurationError(problem)
    return limit


def limit_problem(limit: float) -> str | None:
    """Why ``limit`` cannot be a run limit, or ``None`` when it can."""
    if not limit > 0:
        return f"timeout must be > 0 (got {limit:g})"
    if limit < SHORTEST_RUN_LIMIT:
        return (
            f"timeout must be at least {SHORTEST_RUN_LIMIT:g} seconds, the least in which "
            f"a program can start (got {limit:g})"
        )
    if not limit <= LONGEST_RUN_LIMIT:
        return f"timeout must be at most {LONGEST_RUN_LIMIT:g} seconds (got {limit:g})"
    return None


def watchdog_seconds(limit: float) -> int:
    """Whole seconds after the program's delivery at which the supervisor ends the container."""
    return math.ceil(limit + WATCHDOG_GRACE)


def reading_ends_after(limit: float) -> float:
    """Seconds the host reads a run's streams at most: past the watchdog, the engine is asked."""
    return SUPERVISOR_START_ALLOWANCE + watchdog_seconds(limit) + ENGINE_CONFIRMATION_SECONDS


def cold_label_deadline(now: float, limit: float, reap_grace: float) -> float:
    """Reaper label of a container launched for one run at ``now`` (unix seconds)."""
    return now + limit + reap_grace


def pool_member_lifetime(idle_seconds: float, run_timeout: float, reap_grace: float) -> float:
    """How far past its launch a pooled container's reaper label lies.

    Twice the idle lifetime (the keeper checks it only now and then), then the
    run timeout and the reap grace.
    """
    return 2 * idle_seconds + run_timeout + reap_grace


def longest_pooled_run(idle_seconds: float, run_timeout: float) -> float:
    """The longest run a pooled container can still serve at the end of its idle lifetime."""
    return idle_seconds + run_timeout


def pooled_member_fits(
    *,
    now: float,
    waited: float,
    idle_seconds: float,
    label_deadline: float,
    limit: float,
    reap_grace: float,
) -> bool:
    """Whether a pooled container that waited ``waited`` seconds may serve a run of ``limit``."""
    return waited <= idle_seconds and now + limit + reap_grace < label_deadline


def pool_check_interval(idle_seconds: float) -> float:
    return min(idle_seconds / 4, POOL_CHECK_INTERVAL_LIMIT)
