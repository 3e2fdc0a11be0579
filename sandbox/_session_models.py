"""What a session's cell gives back, and the limits a session lives within."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

MIB = 1024 * 1024


class SessionLimits(BaseModel):
    """How long a session and its cells may run, and how much of their output comes back.

    Frozen; pass it to ``DockerSandbox.session(limits=...)``. Memory, processes,
    CPUs, disk and network are the sandbox's own settings (``SandboxConfig``),
    the same as for a run.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    cell_timeout: float = Field(default=30.0, gt=0, le=86_400)
    """Seconds a cell may run before it is interrupted (``KeyboardInterrupt``; state kept)."""
    interrupt_grace: float = Field(default=3.0, gt=0, le=600)
    """Seconds an interrupted cell has to stop before the interpreter is killed (state lost)."""
    idle_timeout: float = Field(default=600.0, gt=0, le=86_400)
    """Seconds without a request after which the session ends and its container is removed."""
    max_lifetime: float = Field(default=3600.0, gt=0, le=7 * 86_400)
    """Seconds after which the session ends, however busy."""
    start_timeout: float = Field(default=60.0, gt=0, le=3600)
    """Seconds the interpreter may take to start."""
    max_sessions: int = Field(default=32, ge=1, le=10_000)
    """Sessions one process may hold open at once."""
    max_display_bytes: int = Field(default=32 * MIB, ge=1024)
    """Bytes of display outputs (images, HTML...) one cell may return; the rest is dropped."""
    max_file_bytes: int = Field(default=32 * MIB, ge=1)
    """Largest file ``put_file`` sends or ``get_file`` returns."""


class CellError(BaseModel):
    """The exception a cell raised (as the interpreter reports it)."""

    model_config = ConfigDict(frozen=True)

    name: str
    value: str
    traceback: str = ""


class DisplayOutput(BaseModel):
    """One display output: a MIME bundle, binary types (images, PDF) as bytes.

    ``kind`` is ``"result"`` for the value of a cell's last expression and
    ``"display"`` for ``display()`` calls and shown figures.
    """

    model_config = ConfigDict(frozen=True, ser_json_bytes="base64", val_json_bytes="base64")

    kind: Literal["display", "result"]
    data: dict[str, str | bytes]


class OutputEvent(BaseModel):
    """Output a cell printed, as it came."""

    model_config = ConfigDict(frozen=True)

    stream: Literal["stdout", "stderr"]
    text: str


class CellResult(BaseModel):
    """What one cell did. The cell's own failures are data here, never exceptions.

    ``timed_out``, ``state_lost`` and ``reason`` come from the session's
    supervisor, which the cell's code cannot reach; ``outputs``, ``error`` and
    ``execution_count`` are the interpreter's word, as trustworthy as the code
    that ran in it.
    """

    model_config = ConfigDict(frozen=True, ser_json_bytes="base64", val_json_bytes="base64")

    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    outputs: list[DisplayOutput] = Field(default_factory=list)
    outputs_truncated: bool = False
    error: CellError | None = None
    execution_count: int | None = None
    duration: float = 0.0
    timed_out: bool = False
    state_lost: bool = False
    """The interpreter was replaced by a fresh one (killed after a timeout, out of memory,
    died): variables and imports of earlier cells are gone; files stay."""
    reason: str | None = None
    """Why the state was lost, in words."""

    @property
    def ok(self) -> bool:
        """The cell ran to its end without an error, a timeout or a lost state."""
        return self.error is None and not self.timed_out and not self.state_lost


class FileEntry(BaseModel):
    """One entry of a session's work dir listing."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: Literal["file", "folder", "link", "other"]
    size: int


SessionEvent = OutputEvent | DisplayOutput | CellResult
"""What :meth:`Session.stream` yields: output as it comes, display outputs, then the result."""
