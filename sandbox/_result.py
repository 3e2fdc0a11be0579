"""What a program, a cell or a command did: one base, and the throwaway run's result.

:class:`Outcome` holds what every kind of result has (the two streams and their
truncation, whether the time limit ended it, how long it took, its exit code, a
one-line status and the output as one text); :class:`ExecutionResult` (a run in
a throwaway container), :class:`~._session_models.CellResult` (a session's cell)
and :class:`~._session_models.CommandResult` (a command beside a session's
interpreter) derive from it, and every front end reads them through it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, computed_field

from ..core import trim_middle
from ._files import Artifact
from ._network_log import NetworkLog

RUNNER_RESULT_MARKER = "[RUNNER_RESULT]"
TIMEOUT_EXIT_CODE = 124
"""Exit code reported when the wall-clock deadline ended the program (as GNU timeout)."""
KILLED_EXIT_CODE = 137
"""Exit code of a program killed for its memory (128 + SIGKILL)."""
ERROR_EXIT_CODE = 1
"""Exit code of a cell that raised, or whose interpreter was replaced."""


class Outcome(BaseModel):
    """What every kind of result says: output, how it ended, how long it took.

    The code's own failures are data here, never exceptions.
    """

    model_config = ConfigDict(frozen=True)

    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timed_out: bool = False
    """The time limit ended it (decided outside the code, which cannot forge it)."""
    duration: float = 0.0
    """Seconds it took."""
    exit_code: int = 0
    """The process's exit code; 124 when the time limit ended it (as ``timeout(1)``)."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """It ended on its own with exit code 0, within its limits."""
        return self.exit_code == 0 and not self.timed_out

    @computed_field  # type: ignore[prop-decorator]
    @property
    def status(self) -> str:
        """One line: ``exit code 0``, ``timed out`` and the like."""
        if self.timed_out:
            return "timed out"
        return f"exit code {self.exit_code}"

    def notes(self) -> list[str]:
        """What the sandbox did to the output or the program, one short line each."""
        if self.stdout_truncated or self.stderr_truncated:
            return ["[output truncated by the sandbox]"]
        return []

    def combined_output(self) -> str:
        """stdout, then stderr, then the sandbox's notes, each after a line break."""
        return self.stdout + self.stderr + "".join("\n" + note for note in self.notes())


class ExecutionResult(Outcome):
    """What a program did in its throwaway container."""

    language: str
    exit_code: int
    oom_killed: bool = False
    duration: float
    """Seconds from the program's start (its supervisor's acknowledgement) until its end."""
    image: str
    run_id: str
    timeout: float
    """The wall-clock limit that applied, in seconds."""
    memory_limit_bytes: int
    """The memory limit that applied."""
    artifacts: tuple[Artifact, ...] = ()
    """Files the program left in its output folder (``<workdir>/out``)."""
    artifacts_truncated: bool = False
    """Some files of the output folder did not come back: over the count or size cap."""
    artifacts_skipped: tuple[str, ...] = ()
    """Why files of the output folder were left out (links, fifos, odd names, the caps)."""
    network: NetworkLog | None = None
    """Every request of a network-by-policy run (``SandboxConfig.egress``); else ``None``."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """The program exited with 0 on its own, neither timed out nor killed for memory."""
        return self.exit_code == 0 and not self.timed_out and not self.oom_killed

    @computed_field  # type: ignore[prop-decorator]
    @property
    def status(self) -> str:
        """One line: ``exit code 0``, ``timed out after 10s``, ``killed: out of memory ...``."""
        if self.timed_out:
            return f"timed out after {self.timeout:g}s"
        if self.oom_killed:
            return f"killed: out of memory (limit {_format_size(self.memory_limit_bytes)})"
        return f"exit code {self.exit_code}"

    @property
    def posix_exit_code(self) -> int:
        """The exit code a shell would see: the program's own, 124 when it timed out,
        137 when it was killed for its memory."""
        if self.timed_out:
            return TIMEOUT_EXIT_CODE
        if self.oom_killed:
            return KILLED_EXIT_CODE
        return self.exit_code

    def notes(self) -> list[str]:
        notes = super().notes()
        if self.oom_killed:
            notes.append(f"[{self.status}]")
        return notes

    def to_runner_message(self, max_chars: int = 4000) -> str:
        """Render ``[RUNNER_RESULT]``, the status line, stdout and (labelled) stderr.

        Each stream longer than its share of ``max_chars`` keeps its head and tail
        around a ``… [N characters trimmed] …`` marker.
        """
        stdout = self.stdout
        stderr = self.stderr
        if self.stdout_truncated:
            stdout += "\n[stdout truncated by the sandbox]"
        if self.stderr_truncated:
            stderr += "\n[stderr truncated by the sandbox]"
        budget = max(max_chars, 200)
        if stderr:
            # stderr usually holds the traceback the coder needs: give it at least half.
            stderr_budget = max(budget // 2, budget - len(stdout))
            stdout_budget = max(budget - min(len(stderr), stderr_budget), 0)
        else:
            stdout_budget, stderr_budget = budget, 0
        parts = [RUNNER_RESULT_MARKER, self.status]
        if stdout:
            parts.append(trim_middle(stdout, stdout_budget).rstrip("\n"))
        if stderr:
            parts.append("[stderr]")
            parts.append(trim_middle(stderr, stderr_budget).rstrip("\n"))
        if not stdout and not stderr:
            parts.append("(no output)")
        if self.artifacts or self.artifacts_skipped:
            parts.append(self.artifacts_listing())
        if self.network is not None:
            parts.extend(self.network.runner_lines())
        return "\n".join(parts)

    def artifacts_listing(self) -> str:
        """``[files]`` and one line per artifact (name, size, type), then what was left out."""
        lines = ["[files]"]
        lines += [
            f"out/{item.name} ({_format_count(item.size)}, {item.media_type})"
            for item in self.artifacts
        ]
        if self.artifacts_truncated:
            lines.append("[some files were left out: over the output limits]")
        lines += [f"[left out: out/{note}]" for note in self.artifacts_skipped]
        return "\n".join(lines)


def _format_size(value: int) -> str:
    mib = 1024 * 1024
    if value % mib == 0:
        return f"{value // mib} MiB"
    return f"{value} bytes"


def _format_count(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"
