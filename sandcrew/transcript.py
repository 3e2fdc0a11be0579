"""A solve's transcript: its events, the writer that appends them and the reader that reads
them back, side by side.

A transcript is JSON lines, one event a line, told apart by ``event``: a ``header`` (who
ran what, where, with which settings), a ``message`` for every chat message, a ``run`` for
every program the runner ran, a ``tool_call_attempt`` for each reply a model got wrong
when a function call was required, and a closing ``result`` holding the solve's
:class:`~sandcrew.crew.CrewResult` (the same document ``solve --json`` prints). Each event
carries ``elapsed``, seconds since the transcript began. ``format`` in the header is
:data:`TRANSCRIPT_FORMAT`; the reader refuses another.
"""

from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import IO, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

import sandcrew
from sandcrew.agents import FunctionCallRequiredError, Message
from sandcrew.core import summarize_problem
from sandcrew.crew import CrewResult, CrewSettings
from sandcrew.errors import UserError
from sandcrew.sandbox import ExecutionResult

TRANSCRIPT_FORMAT: Literal[2] = 2
"""Version of the transcript's events; bumped only on incompatible changes."""


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True)

    elapsed: float = 0.0
    """Seconds since the transcript began."""


class HeaderEvent(_Event):
    """The first event: who ran what, where, with which settings, and when."""

    event: Literal["header"] = "header"
    format: int = TRANSCRIPT_FORMAT
    sandcrew: str
    task: str
    started: datetime.datetime
    models: dict[str, str]
    endpoint: str | None
    settings: dict[str, Any]
    """The crew's settings as they were, without the API key."""


class MessageEvent(_Event):
    """A chat message (a run's message is a :class:`RunEvent`)."""

    event: Literal["message"] = "message"
    message: Message


class RunEvent(_Event):
    """A program the runner ran, and the message the chat saw for it."""

    event: Literal["run"] = "run"
    sender: str
    content: str
    """What the chat saw: the run rendered for the coder."""
    run: ExecutionResult


class AttemptEvent(_Event):
    """A reply that did not make the required function call, and what was wrong with it."""

    event: Literal["tool_call_attempt"] = "tool_call_attempt"
    attempt: int
    reply: Message
    errors: list[str]


class ResultEvent(_Event):
    """The last event: how the solve went."""

    event: Literal["result"] = "result"
    result: CrewResult


TranscriptEvent = Annotated[
    HeaderEvent | MessageEvent | RunEvent | AttemptEvent | ResultEvent,
    Field(discriminator="event"),
]
_EVENT: TypeAdapter[TranscriptEvent] = TypeAdapter(TranscriptEvent)


class TranscriptWriter:
    """Appends one event a line to ``file`` (if given), keeping them in ``events`` if asked.

    Nothing is counted or computed here: the messages and the result are the crew's own.
    """

    def __init__(self, file: IO[str] | None, *, keep: bool = False) -> None:
        self._file = file
        self._keep = keep
        self._started = time.monotonic()
        self.events: list[TranscriptEvent] = []
        """Every event, when asked to keep them (for the HTML page)."""

    def header(self, task: str, settings: CrewSettings) -> None:
        self._write(
            HeaderEvent(
                sandcrew=sandcrew.__version__,
                task=task,
                started=datetime.datetime.now(datetime.UTC).replace(microsecond=0),
                models={role: settings.model_for(role) for role in ("admin", "coder", "reviewer")},
                endpoint=settings.endpoint.base_url,
                settings=settings.model_dump(mode="json", exclude={"endpoint": {"api_key"}}),
                elapsed=self._elapsed(),
            )
        )

    def message(self, message: Message) -> None:
        if isinstance(message.data, ExecutionResult):
            self._write(
                RunEvent(
                    sender=message.sender or "runner",
                    content=message.content,
                    run=message.data,
                    elapsed=self._elapsed(),
                )
            )
        else:
            self._write(MessageEvent(message=message, elapsed=self._elapsed()))

    def result(self, result: CrewResult) -> None:
        """The closing event; the replies a model got wrong come first, for the post-mortem."""
        if isinstance(result.exception, FunctionCallRequiredError):
            # The calls a model got wrong never reach the chat.
            for number, attempt in enumerate(result.exception.attempts, start=1):
                self._write(
                    AttemptEvent(
                        attempt=number,
                        reply=attempt.reply,
                        errors=attempt.errors,
                        elapsed=self._elapsed(),
                    )
                )
        self._write(ResultEvent(result=result, elapsed=self._elapsed()))

    def _elapsed(self) -> float:
        return round(time.monotonic() - self._started, 4)

    def _write(self, event: TranscriptEvent) -> None:
        if self._file is None and not self._keep:
            return
        line = event.model_dump_json()
        if self._keep:
            # The page shows what the file holds: the event as it reads back.
            self.events.append(_EVENT.validate_json(line))
        if self._file is not None:
            self._file.write(line + "\n")
            self._file.flush()


def read_transcript(path: Path) -> list[TranscriptEvent]:
    """The events of a transcript file; a line that is not one is a clear error."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"cannot read transcript {path}: {error}") from None
    events: list[TranscriptEvent] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            event = _EVENT.validate_json(line)
        except ValidationError as error:
            raise UserError(
                f"{path} line {number} is not a transcript event from `sandcrew solve "
                f"--transcript` ({summarize_problem(error.errors()[0], whole='line')})"
            ) from None
        if isinstance(event, HeaderEvent) and event.format != TRANSCRIPT_FORMAT:
            raise UserError(
                f"{path} is a transcript of format {event.format}; this sandcrew reads "
                f"format {TRANSCRIPT_FORMAT} (render it with the sandcrew that wrote it)"
            )
        events.append(event)
    return events
