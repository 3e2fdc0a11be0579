"""The MCP tools as typed functions: their ``@function`` contracts are the schemas clients see.

The contracts are built per server, from its :class:`ServerLimits`, so that the limits a
client may not exceed are part of each schema (``maximum``, ``enum``) and a call asking
for more is refused by the same validation that checks the argument types.
"""

# No `from __future__ import annotations`: the contracts read the limits from the
# closure at definition time, which string annotations could not see.

from typing import Annotated, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from sandcrew.crew import CrewResult
from sandcrew.functions import FunctionTool, function
from sandcrew.sandbox import ExecutionResult

MIB = 1024 * 1024
MIN_MEMORY_MIB = 16
"""Smallest memory limit a client may ask for; below it the interpreter cannot start."""


class ServerLimits(BaseModel):
    """What the server allows a client: fixed when the server starts, never raised by a call."""

    model_config = ConfigDict(frozen=True)

    max_timeout: float = Field(gt=0)
    """Longest wall-clock limit of one run, seconds; also the default."""
    max_memory_bytes: int = Field(ge=MIN_MEMORY_MIB * MIB)
    """Largest memory limit of one run; also the default."""
    allow_network: bool = False
    """Whether a client may ask for network access (runs are offline unless asked)."""


INLINE_ARTIFACT_BYTES = 64 * 1024
"""A file the program wrote comes back with its bytes only up to this size."""


class ArtifactResult(BaseModel):
    """One file the program wrote into ``out/``."""

    name: str
    """Its path below ``out/``."""
    size: int
    media_type: str
    """Guessed from the name."""
    data_base64: str | None
    """Its bytes, base64-encoded, when it is at most 64 KiB; else ``None``."""


class RunCodeResult(BaseModel):
    """What a program did. Its failure (non-zero exit, timeout, OOM) is data, not an error."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    oom_killed: bool
    stdout_truncated: bool
    stderr_truncated: bool
    status: str
    """One line: ``exit code 0``, ``timed out after 5s``, ``killed: out of memory ...``."""
    language: str
    duration: float
    timeout: float
    memory_limit_bytes: int
    artifacts: list[ArtifactResult] = []
    """The files the program wrote into ``out/``."""
    artifacts_truncated: bool = False
    """Some files were left out (over the count or size caps)."""

    @classmethod
    def of(cls, result: ExecutionResult) -> "RunCodeResult":
        return cls(
            exit_code=result.exit_code,
            stdout=result.stdout,
            stderr=result.stderr,
            timed_out=result.timed_out,
            oom_killed=result.oom_killed,
            stdout_truncated=result.stdout_truncated,
            stderr_truncated=result.stderr_truncated,
            status=result.status,
            language=result.language,
            duration=round(result.duration, 3),
            timeout=result.timeout,
            memory_limit_bytes=result.memory_limit_bytes,
            artifacts=[
                ArtifactResult(
                    name=artifact.name,
                    size=artifact.size,
                    media_type=artifact.media_type,
                    data_base64=(
                        artifact.data_base64() if artifact.size <= INLINE_ARTIFACT_BYTES else None
                    ),
                )
                for artifact in result.artifacts
            ],
            artifacts_truncated=result.artifacts_truncated,
        )


class LanguagesResult(BaseModel):
    """The languages ``run_code`` accepts and the limits that apply to every run."""

    languages: list[str]
    default_language: str
    max_timeout: float
    max_memory_mb: int
    network_allowed: bool


class Toolbox(Protocol):
    """What the tools do once their arguments are valid."""

    async def run_code(
        self,
        code: str,
        language: str,
        *,
        timeout: float | None,  # noqa: ASYNC109  (the program's limit, enforced by the sandbox)
        memory_bytes: int | None,
        network: bool,
        files: dict[str, str] | None = None,
    ) -> RunCodeResult: ...

    def list_languages(self) -> LanguagesResult: ...

    async def solve(self, task: str) -> CrewResult: ...


def tool_contracts(
    limits: ServerLimits, toolbox: Toolbox, *, with_solve: bool
) -> list[FunctionTool[..., Any]]:
    """The tools a server with ``limits`` offers; ``solve`` only when a model is configured."""
    max_memory_mib = limits.max_memory_bytes // MIB
    network_values = [False, True] if limits.allow_network else [False]
    network_note = (
        "Allow network access for this run (off unless asked)."
        if limits.allow_network
        else "Network access; this server does not allow it, so only false is accepted."
    )

    @function(strict=False)
    async def run_code(
        code: Annotated[str, Field(description="The program's source text.")],
        language: Annotated[
            str, Field(description="The program's language; list_languages() names them.")
        ] = "python",
        timeout: Annotated[  # noqa: ASYNC109  (the program's limit, enforced by the sandbox)
            float | None,
            Field(
                gt=0,
                le=limits.max_timeout,
                description=(
                    f"Wall-clock limit in seconds, at most {limits.max_timeout:g} (the default)."
                ),
            ),
        ] = None,
        memory_mb: Annotated[
            int | None,
            Field(
                ge=MIN_MEMORY_MIB,
                le=max_memory_mib,
                description=f"Memory limit in MiB, at most {max_memory_mib} (the default).",
            ),
        ] = None,
        network: Annotated[
            bool, Field(description=network_note, json_schema_extra={"enum": network_values})
        ] = False,
        files: Annotated[
            dict[str, str] | None,
            Field(
                description=(
                    "Text files put into the program's working directory before it starts, "
                    "read-only: relative name (e.g. data/input.csv) to its UTF-8 content."
                )
            ),
        ] = None,
    ) -> RunCodeResult:
        """Run a program in a new, hardened, throwaway container and report what it did.

        The program's own failure (non-zero exit code, timeout, out-of-memory kill) is
        reported in the result; stdout and stderr are capped and flagged when truncated.
        Files the program writes into the folder out/ of its working directory come back
        in artifacts (with their bytes up to 64 KiB each).
        """
        return await toolbox.run_code(
            code,
            language,
            timeout=timeout,
            memory_bytes=None if memory_mb is None else memory_mb * MIB,
            network=network,
            files=files,
        )

    @function(strict=False)
    def list_languages() -> LanguagesResult:
        """The languages run_code accepts, and the limits every run is held to."""
        return toolbox.list_languages()

    tools: list[FunctionTool[..., Any]] = [run_code, list_languages]
    if with_solve:

        @function(strict=False)
        async def solve(
            task: Annotated[
                str, Field(description='The task, e.g. "What\'s the 39th Fibonacci number?"')
            ],
        ) -> CrewResult:
            """Let sandcrew's crew (coder, reviewer, runner) solve a task by writing and
            running code; returns the answer, why the chat stopped and every run (the
            document `sandcrew solve --json` prints)."""
            return await toolbox.solve(task)

        tools.append(solve)
    return tools
