"""What a session's cell gives back, and the limits a session lives within."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    computed_field,
    model_serializer,
    model_validator,
)
from typing_extensions import TypedDict

from ._inline import INLINE_BYTES, from_base64, inline_base64
from ._result import ERROR_EXIT_CODE, TIMEOUT_EXIT_CODE, ExecutionResult, Outcome

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


_BINARY_PREFIXES = ("image/", "application/pdf", "audio/", "video/")


def is_binary_type(media_type: str) -> bool:
    """Whether a MIME type's data is bytes (base64 in JSON, as Jupyter has it): images but
    SVG, PDF, audio and video."""
    return media_type.startswith(_BINARY_PREFIXES) and not media_type.startswith("image/svg")


class DisplayJson(TypedDict):
    """A display output as JSON documents carry it."""

    kind: Literal["display", "result"]
    data: dict[str, str]
    """Text types as they are; binary types (images but SVG, PDF, audio, video) base64."""
    omitted: list[str]
    """MIME types left out: larger than :data:`~sandcrew.sandbox.INLINE_BYTES`."""


class DisplayOutput(BaseModel):
    """One display output: a MIME bundle, binary types (images, PDF) as bytes.

    ``kind`` is ``"result"`` for the value of a cell's last expression and
    ``"display"`` for ``display()`` calls and shown figures. In JSON, binary
    types are base64 text up to :data:`~sandcrew.sandbox.INLINE_BYTES` and a
    larger entry is left out and named in ``omitted`` (see :mod:`._inline`).
    """

    model_config = ConfigDict(frozen=True)

    kind: Literal["display", "result"]
    data: dict[str, str | bytes]

    @model_serializer(mode="plain", when_used="json")
    def _with_inline_bytes(self) -> DisplayJson:
        data: dict[str, str] = {}
        omitted: list[str] = []
        for media_type, value in self.data.items():
            raw = value if isinstance(value, bytes) else value.encode()
            text = inline_base64(raw) if isinstance(value, bytes) else value
            if text is None or len(raw) > INLINE_BYTES:
                omitted.append(media_type)
            else:
                data[media_type] = text
        return {"kind": self.kind, "data": data, "omitted": omitted}

    @model_validator(mode="before")
    @classmethod
    def _bytes_from_json(cls, value: Any) -> Any:
        if not isinstance(value, dict) or "omitted" not in value:
            return value
        data = value.get("data")
        if isinstance(data, dict):
            data = {
                media_type: from_base64(item)
                if is_binary_type(media_type) and isinstance(item, str)
                else item
                for media_type, item in data.items()
            }
        return {"kind": value.get("kind"), "data": data}

    @classmethod
    def from_wire(cls, message: dict[str, Any]) -> DisplayOutput | None:
        """A display output from the supervisor's ``display`` frame (``None`` if it holds none)."""
        data, binary = message.get("data"), message.get("binary")
        if not isinstance(data, dict):
            return None
        binary_types = set(binary) if isinstance(binary, list) else set()
        bundle: dict[str, str | bytes] = {}
        for media_type, value in data.items():
            if not isinstance(media_type, str) or not isinstance(value, str):
                continue
            if media_type in binary_types:
                try:
                    bundle[media_type] = from_base64(value)
                except ValueError:
                    bundle[media_type] = value
            else:
                bundle[media_type] = value
        return cls(kind="result" if message.get("kind") == "result" else "display", data=bundle)

    def text(self) -> str | None:
        """Its ``text/plain`` entry, if it has one."""
        plain = self.data.get("text/plain")
        return plain if isinstance(plain, str) else None


class OutputEvent(BaseModel):
    """Output a cell or a command printed, as it came."""

    model_config = ConfigDict(frozen=True)

    stream: Literal["stdout", "stderr"]
    text: str


class CellResult(Outcome):
    """What one cell did. The cell's own failures are data here, never exceptions.

    ``timed_out``, ``state_lost``, ``reason`` and ``duration`` come from the
    session's supervisor, which the cell's code cannot reach; ``outputs``,
    ``error`` and ``execution_count`` are the interpreter's word, as trustworthy
    as every cell that ran in it. ``exit_code`` follows from them, one rule for
    every front end: 124 when it timed out, 1 when it raised or lost its state,
    else 0.
    """

    outputs: list[DisplayOutput] = Field(default_factory=list)
    outputs_truncated: bool = False
    error: CellError | None = None
    execution_count: int | None = None
    state_lost: bool = False
    """The interpreter was replaced by a fresh one (killed after a timeout, out of memory,
    died): variables and imports of earlier cells are gone; files stay."""
    reason: str | None = None
    """Why the state was lost, in words."""

    @model_validator(mode="before")
    @classmethod
    def _exit_code_of_the_cell(cls, value: Any) -> Any:
        if isinstance(value, dict):
            if value.get("timed_out"):
                code = TIMEOUT_EXIT_CODE
            elif value.get("error") is not None or value.get("state_lost"):
                code = ERROR_EXIT_CODE
            else:
                code = 0
            value = {**value, "exit_code": code}
        return value

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """The cell ran to its end without an error, a timeout or a lost state."""
        return self.error is None and not self.timed_out and not self.state_lost

    @computed_field  # type: ignore[prop-decorator]
    @property
    def status(self) -> str:
        if self.timed_out:
            return "timed out"
        if self.state_lost:
            return f"interpreter restarted: {self.reason or 'it ended'}"
        if self.error is not None:
            return f"error: {self.error.name}"
        return "ok"

    def shown(self) -> list[str]:
        """The ``text/plain`` of its display outputs, in order."""
        return [text for output in self.outputs if (text := output.text()) is not None]

    def notes(self) -> list[str]:
        notes = super().notes()
        if self.outputs_truncated:
            notes.append("[display outputs over the limit were left out]")
        if self.state_lost:
            notes.append(
                f"[the interpreter was restarted: {self.reason or 'it ended'}; "
                "variables are gone, files kept]"
            )
        return notes

    def as_text(self) -> tuple[str, str]:
        """The cell as a program's two streams: printed output then displayed values on the
        first; stderr, the error's traceback and the sandbox's notes on the second."""
        stdout = self.stdout + "".join(text + "\n" for text in self.shown())
        stderr = self.stderr
        if self.error is not None:
            stderr += (self.error.traceback or f"{self.error.name}: {self.error.value}") + "\n"
        stderr += "".join(note + "\n" for note in self.notes())
        return stdout, stderr

    def as_run(
        self, *, language: str, image: str, run_id: str, timeout: float, memory_limit_bytes: int
    ) -> ExecutionResult:
        """The cell as a run's result (its text as :meth:`as_text` gives it), for front ends
        that read every program's outcome the same way (the crew's runner)."""
        stdout, stderr = self.as_text()
        return ExecutionResult(
            language=language,
            exit_code=self.exit_code,
            stdout=stdout,
            stderr=stderr,
            timed_out=self.timed_out,
            stdout_truncated=self.stdout_truncated,
            stderr_truncated=self.stderr_truncated,
            duration=self.duration,
            image=image,
            run_id=run_id,
            timeout=timeout,
            memory_limit_bytes=memory_limit_bytes,
        )


class CommandResult(Outcome):
    """What a command run beside a session's interpreter did."""

    id: str
    signal: int | None = None
    """The signal that ended it, if one did (its exit code is then 128 + the signal)."""
    error: str | None = None
    """Why it could not start or run to its end, when the session says so."""


class FileEntry(BaseModel):
    """One entry of a session's work dir."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: Literal["file", "folder", "link", "other"]
    size: int
    mode: int | None = None
    """Its permission bits."""
    modified: float | None = None
    """When it was last changed, in Unix seconds."""


SessionEvent = OutputEvent | DisplayOutput | CellResult
"""What :meth:`Session.stream` yields: output as it comes, display outputs, then the result."""
