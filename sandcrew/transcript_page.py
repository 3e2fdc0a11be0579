"""A solve transcript (``--transcript`` JSON lines) as one readable HTML page.

Each record becomes a card: the speaker, the time since the chat began, the
tokens of the model call that produced it, and its text; a review shows its
verdict and checks; a run shows the code it ran (the last code block the coder
wrote before it), its exit status, duration, stdout and stderr, and the files
it wrote into ``out/``. Failed tool-call attempts and the outcome (answer, stop
reason, rounds, tokens) close the page. All of it is untrusted text and is
escaped; the page runs no script.

A file the program wrote is shown as an image only when its bytes are a PNG,
JPEG, GIF or WebP image (by their signature, whatever the name says) of at
most :data:`INLINE_IMAGE_BYTES`, as a ``data:`` URI: the page stays one file
and loads nothing. SVG and HTML could carry script and are never shown inline.
The bytes come from the run itself (``solve --html``) or from the files that
``--out`` saved (``sandcrew transcript``).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from html import escape
from pathlib import Path

from sandcrew.core import read_regular_file
from sandcrew.crew import CrewResult
from sandcrew.errors import UserError
from sandcrew.html_page import html_page, meta_line
from sandcrew.sandbox import Artifact
from sandcrew.transcript import (
    AttemptEvent,
    MessageEvent,
    ResultEvent,
    RunEvent,
    TranscriptEvent,
)

_STYLE = """
.message { border: 1px solid #d1d9e0; border-radius: 6px; padding: .5rem .8rem;
  margin: .8rem 0; }
.message header { display: flex; gap: 1rem; color: #59636e; }
.message header .speaker { font-weight: 600; color: #1f2328; }
.run { border-left: 4px solid #1a7f37; } .run.failed { border-left-color: #cf222e; }
.attempt { border-style: dashed; }
table.checks td { padding: .1rem .6rem .1rem 0; }
.outcome { border: 2px solid #d1d9e0; border-radius: 6px; padding: .6rem .9rem; }
figure { margin: .5rem 0; } figure img { max-width: 100%; border: 1px solid #d1d9e0; }
figcaption, .artifact { color: #59636e; }
"""

INLINE_IMAGE_BYTES = 2 * 1024 * 1024
"""An image larger than this is named on the page, not shown."""
PAGE_IMAGE_BYTES = 24 * 1024 * 1024
"""The images of one page together; past this, further ones are named, not shown."""

_IMAGE_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)

ArtifactBytes = Mapping[tuple[int, str], bytes]
"""The bytes of a run's file: (the run's number on the page, from 0; the file's name)."""

_CODE_BLOCK = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)


def raster_image_type(data: bytes) -> str | None:
    """The media type of a PNG, JPEG, GIF or WebP image, told by its first bytes; else None."""
    for signature, media_type in _IMAGE_SIGNATURES:
        if data.startswith(signature):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def saved_artifact_bytes(events: list[TranscriptEvent]) -> dict[tuple[int, str], bytes]:
    """The bytes of the runs' files that ``--out`` saved and that are still as recorded.

    Only files small enough to be shown are read; a file whose size differs from
    the recorded one (a later run's file of the same name replaced it) is left out.
    """
    found: dict[tuple[int, str], bytes] = {}
    for number, artifacts in enumerate(_artifacts_by_run(events)):
        for artifact in artifacts:
            if artifact.path is None or artifact.size > INLINE_IMAGE_BYTES:
                continue
            try:
                # Never through a link at its end, nor blocking on a FIFO put there since.
                data = read_regular_file(artifact.path, INLINE_IMAGE_BYTES, follow_link=False)
            except OSError:
                continue
            if len(data) == artifact.size:
                found[(number, artifact.name)] = data
    return found


def render_transcript_page(
    events: list[TranscriptEvent], *, artifact_bytes: ArtifactBytes | None = None
) -> str:
    """The chat page for ``events`` (as ``solve --transcript`` writes them).

    ``artifact_bytes`` are the runs' files, for the images among them to be shown.
    """
    result = _result(events)
    task = result.task if result else _first_text(events)
    files = _FileShower(_artifacts_by_run(events), artifact_bytes or {})
    cards: list[str] = []
    last_code: str | None = None
    previous_elapsed = 0.0
    for event in events:
        if isinstance(event, MessageEvent):
            code_blocks = _CODE_BLOCK.findall(event.message.content)
            if code_blocks:
                last_code = code_blocks[-1]
            cards.append(_message_card(event, event.elapsed - previous_elapsed))
        elif isinstance(event, RunEvent):
            cards.append(_run_card(event, last_code, files.next_run()))
        elif isinstance(event, AttemptEvent):
            cards.append(_attempt_card(event))
        previous_elapsed = event.elapsed
    body = [f"<h1>{escape(task or 'sandcrew chat')}</h1>"]
    if result is not None:
        body.append(_outcome(result))
    body.append(f'<h2>Chat ({len(cards)} entries)</h2><div id="chat">{"".join(cards)}</div>')
    return html_page(f"{task[:80]} · sandcrew chat", "\n".join(body), style=_STYLE)


def write_transcript_page(
    events: list[TranscriptEvent], path: Path, *, artifact_bytes: ArtifactBytes | None = None
) -> None:
    """Write the chat page for ``events`` to ``path``."""
    try:
        page = render_transcript_page(events, artifact_bytes=artifact_bytes)
        path.write_text(page, encoding="utf-8")
    except OSError as error:
        raise UserError(f"cannot write the HTML page to {path}: {error}") from None


def _outcome(result: CrewResult) -> str:
    facts = [
        ("Stop reason", result.stop_reason.value),
        ("Rounds", str(result.rounds)),
        ("Tokens", str(result.total_tokens)),
        ("Duration", f"{result.duration:.2f}s"),
        ("Runs", str(len(result.runs))),
    ]
    verdict = '<b class="ok">solved</b>' if result.solved else '<b class="bad">not solved</b>'
    parts = [f'<section class="outcome" id="outcome"><p>{verdict}</p>', meta_line(facts)]
    if result.answer:
        parts.append(f'<p>Answer:</p><pre class="answer">{escape(result.answer)}</pre>')
    if result.stop_detail:
        parts.append(f"<p>{escape(result.stop_detail)}</p>")
    if result.error:
        parts.append(f'<p class="bad">Error: {escape(result.error)}</p>')
    parts.append("</section>")
    return "".join(parts)


def _header(speaker: str, elapsed: float, extra: list[str]) -> str:
    items = [f'<span class="speaker">{escape(speaker)}</span>', f"<span>{elapsed:.2f}s</span>"]
    items += [f"<span>{escape(item)}</span>" for item in extra]
    return f"<header>{''.join(items)}</header>"


def _message_card(event: MessageEvent, took: float) -> str:
    message = event.message
    extra = []
    if message.usage is not None:
        extra.append(
            f"model call: {message.usage.prompt_tokens} in, "
            f"{message.usage.completion_tokens} out tokens, {took:.2f}s"
        )
    if message.terminate:
        extra.append("ends the chat")
    parts = [_header(message.sender or "?", event.elapsed, extra)]
    if message.content:
        parts.append(f"<pre>{escape(message.content)}</pre>")
    for call in getattr(message, "tool_calls", []):
        parts.append(f"<p>calls <b>{escape(call.name)}</b></p><pre>{escape(call.arguments)}</pre>")
    for outcome in getattr(message, "results", []):
        parts.append(f"<pre>{escape(outcome.content)}</pre>")
    if isinstance(message.data, dict) and "approved" in message.data:
        parts.append(_review(message.data))
    return f'<article class="message">{"".join(parts)}</article>'


def _review(data: dict[str, object]) -> str:
    approved = bool(data.get("approved"))
    verdict = '<b class="ok">approved</b>' if approved else '<b class="bad">rejected</b>'
    rows = ""
    claims = data.get("claims")
    if isinstance(claims, dict):
        rows = "".join(
            f"<tr><td>{escape(str(name))}</td><td>{escape(str(value))}</td></tr>"
            for name, value in claims.items()
        )
    return f'<div class="review">Review: {verdict}<table class="checks">{rows}</table></div>'


def _result(events: list[TranscriptEvent]) -> CrewResult | None:
    return next((event.result for event in events if isinstance(event, ResultEvent)), None)


def _artifacts_by_run(events: list[TranscriptEvent]) -> list[tuple[Artifact, ...]]:
    """Each run's files as recorded: the result's list (with saved paths) if there is one."""
    runs = [event.run for event in events if isinstance(event, RunEvent)]
    result = _result(events)
    if result is not None and len(result.runs) == len(runs):
        runs = result.runs
    return [run.artifacts for run in runs]


class _FileShower:
    """Renders each run's files in turn, keeping the page's images within their budget."""

    def __init__(self, by_run: list[tuple[Artifact, ...]], data: ArtifactBytes) -> None:
        self._by_run = by_run
        self._data = data
        self._run = -1
        self._room = PAGE_IMAGE_BYTES

    def next_run(self) -> str:
        self._run += 1
        if self._run >= len(self._by_run) or not self._by_run[self._run]:
            return ""
        shown = "".join(self._file(artifact) for artifact in self._by_run[self._run])
        return f'<p>Files</p><div class="files">{shown}</div>'

    def _file(self, artifact: Artifact) -> str:
        name = artifact.name
        label = f"out/{name} ({artifact.size} bytes, {artifact.media_type})"
        data = self._data.get((self._run, name))
        image_type = raster_image_type(data) if data is not None else None
        if data is not None and image_type is not None:
            if len(data) > INLINE_IMAGE_BYTES:
                limit = f"not shown: larger than {INLINE_IMAGE_BYTES // 2**20} MiB"
                return self._named(label, limit, artifact)
            if len(data) > self._room:
                return self._named(label, "not shown: the page holds enough images", artifact)
            self._room -= len(data)
            source = f"data:{image_type};base64,{base64.b64encode(data).decode()}"
            return (
                f'<figure><img src="{source}" alt="{escape(f"out/{name}")}">'
                f"<figcaption>{escape(label)}</figcaption></figure>"
            )
        if data is not None:
            return self._named(label, "not shown: not a PNG, JPEG, GIF or WebP image", artifact)
        return self._named(label, "", artifact)

    @staticmethod
    def _named(label: str, note: str, artifact: Artifact) -> str:
        notes = [note] if note else []
        notes.append("not saved" if artifact.path is None else f"saved to {artifact.path}")
        return f'<p class="artifact">{escape(label)}: {escape("; ".join(notes))}</p>'


def _run_card(event: RunEvent, code: str | None, files: str = "") -> str:
    run = event.run
    extra = [run.status, f"ran {run.duration:.2f}s"]
    parts = [_header(event.sender, event.elapsed, extra)]
    if code is not None:
        parts.append(f'<p>Code</p><pre class="code">{escape(code)}</pre>')
    parts.append(f'<p>stdout</p><pre class="stdout">{escape(run.stdout)}</pre>')
    if run.stderr:
        parts.append(f'<p>stderr</p><pre class="stderr">{escape(run.stderr)}</pre>')
    parts.append(files)
    css = "message run" if run.ok else "message run failed"
    return f'<article class="{css}" data-exit-code="{run.exit_code}">' + (
        "".join(parts) + "</article>"
    )


def _attempt_card(event: AttemptEvent) -> str:
    listed = "".join(f"<li>{escape(error)}</li>" for error in event.errors)
    reply = event.reply.model_dump_json(indent=2)
    return (
        f'<article class="message attempt"><header><span class="speaker">failed tool call '
        f"attempt {event.attempt}</span></header>"
        f"<ul>{listed}</ul><pre>{escape(reply)}</pre></article>"
    )


def _first_text(events: list[TranscriptEvent]) -> str:
    texts = (event.message.content for event in events if isinstance(event, MessageEvent))
    return next((text for text in texts if text), "")
