"""The outcome of one sandboxed run, and its rendering for the crew's runner."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..core import trim_middle
from ._files import Artifact
from ._network_log import NetworkLog

RUNNER_RESULT_MARKER = "[RUNNER_RESULT]"
TIMEOUT_EXIT_CODE = 124
"""Exit code reported when the wall-clock deadline killed the program (as GNU timeout)."""


class ExecutionResult(BaseModel):
    """What a program did in its container. Failures of the program are data, not errors."""

    model_config = ConfigDict(frozen=True)

    language: str
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    oom_killed: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
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

    @property
    def ok(self) -> bool:
        """The program exited with 0 on its own, neither timed out nor killed for memory."""
        return self.exit_code == 0 and not self.timed_out and not self.oom_killed

    @property
    def status(self) -> str:
        """One line: ``exit code 0``, ``timed out after 10s``, ``killed: out of memory ...``."""
        if self.timed_out:
            return f"timed out after {self.timeout:g}s"
        if self.oom_killed:
            return f"killed: out of memory (limit {_format_size(self.memory_limit_bytes)})"
        return f"exit code {self.exit_code}"

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
