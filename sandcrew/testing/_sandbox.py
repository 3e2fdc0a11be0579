"""A test double of the sandbox protocols: scripted results and sessions, no Docker.

For tests of code built on sandcrew (a crew, a solver, a tool) that need to say
what a program "did" without running it: each run is answered from a table of
markers, the first marker the program contains giving its outcome.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sandcrew.sandbox import ExecutionResult, SessionLimits
from sandcrew.sandbox.live import OutputCallback, tell_at_end
from sandcrew.testing._session import ScriptedOutcome, ScriptedSession

SCRIPTED_IMAGE = "scripted"
"""The image an :class:`ExecutionResult` of a :class:`ScriptedSandbox` names."""


@dataclass(frozen=True)
class ScriptedRun(ScriptedOutcome):
    """What a scripted program "did"."""

    oom_killed: bool = False
    duration: float = 0.01


@dataclass(frozen=True)
class RecordedRun:
    """One run a :class:`ScriptedSandbox` was asked for."""

    language: str
    code: str
    timeout: float | None
    files: tuple[str, ...]
    """Names of the input files handed over."""


class ScriptedSandbox:
    """A :class:`~sandcrew.sandbox.Sandbox` answering each run from a table of markers.

    ``outcomes`` maps a marker (any text) to what a program containing it did;
    the first marker found in a program gives its :class:`ScriptedRun`, returned
    as a real :class:`~sandcrew.sandbox.ExecutionResult`. A program the table
    does not know raises ``AssertionError`` (so it fails the test), as does a run
    after :meth:`aclose`. ``runs`` records every run asked for.
    """

    def __init__(
        self,
        outcomes: Mapping[str, ScriptedRun],
        *,
        languages: tuple[str, ...] = ("python", "bash", "javascript"),
        packages: tuple[str, ...] | None = None,
        default_timeout: float = 10.0,
        memory_limit_bytes: int = 256 * 1024 * 1024,
        sessions: Sequence[ScriptedSession] = (),
    ) -> None:
        self.outcomes = dict(outcomes)
        self.sessions = list(sessions)
        """Handed out in order by :meth:`session` (one more is an ``AssertionError``)."""
        self.sessions_opened: list[ScriptedSession] = []
        self.languages = languages
        self.packages = packages
        self.default_timeout = default_timeout
        self.memory_limit_bytes = memory_limit_bytes
        self.runs: list[RecordedRun] = []
        self.started = False
        self.closed = False

    @property
    def supported_languages(self) -> tuple[str, ...]:
        return self.languages

    async def start(self) -> None:
        self.started = True

    async def image_packages(self, language: str = "python") -> tuple[str, ...] | None:
        return self.packages

    async def run(
        self,
        code: str,
        language: str = "python",
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - mirrors the protocol
        files: Mapping[str, bytes | Path] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecutionResult:
        if self.closed:
            raise AssertionError("ScriptedSandbox.run after aclose()")
        if language not in self.languages:
            raise AssertionError(
                f"ScriptedSandbox runs {', '.join(self.languages)}, not {language}"
            )
        self.runs.append(RecordedRun(language, code, timeout, tuple(files or ())))
        outcome = next(
            (scripted for marker, scripted in self.outcomes.items() if marker in code), None
        )
        if outcome is None:
            raise AssertionError(f"ScriptedSandbox has no outcome for this program:\n{code}")
        result = ExecutionResult(
            language=language,
            exit_code=outcome.exit_code,
            stdout=outcome.stdout,
            stderr=outcome.stderr,
            timed_out=outcome.timed_out,
            oom_killed=outcome.oom_killed,
            duration=outcome.duration,
            image=SCRIPTED_IMAGE,
            run_id=secrets.token_hex(6),
            timeout=timeout or self.default_timeout,
            memory_limit_bytes=self.memory_limit_bytes,
        )
        return await tell_at_end(on_output, result)

    def session(
        self,
        language: str = "python",
        *,
        image: str | None = None,
        limits: SessionLimits | None = None,
    ) -> ScriptedSession:
        """The next scripted session (its language, image and limits set as asked)."""
        if len(self.sessions_opened) >= len(self.sessions):
            raise AssertionError("ScriptedSandbox has no more scripted sessions")
        session = self.sessions[len(self.sessions_opened)]
        session.language = language
        if image is not None:
            session.image = image
        if limits is not None:
            session.limits = limits
        self.sessions_opened.append(session)
        return session

    async def aclose(self) -> None:
        self.closed = True

    def close(self) -> None:
        self.closed = True
