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
import json
import os
import re
import stat
from collections.abc import Mapping
from html import escape
from pathlib import Path
from typing import Any

from sandcrew.errors import UserError
from sandcrew.html_page import html_page, meta_line

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

Record = dict[str, Any]


def read_transcript(path: Path) -> list[Record]:
    """The records of a transcript file; a line that is not a JSON object is a clear error."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"cannot read transcript {path}: {error}") from None
    records: list[Record] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise UserError(f"{path} line {number} is not JSON ({error.msg})") from None
        if not isinstance(record, dict) or "event" not in record:
            raise UserError(
                f"{path} line {number} is not a transcript record (from `sandcrew solve "
                "--transcript`)"
            )
        records.append(record)
    return records


def raster_image_type(data: bytes) -> str | None:
    """The media type of a PNG, JPEG, GIF or WebP image, told by its first bytes; else None."""
    for signature, media_type in _IMAGE_SIGNATURES:
        if data.startswith(signature):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def saved_artifact_bytes(records: list[Record]) -> dict[tuple[int, str], bytes]:
    """The bytes of the runs' files that ``--out`` saved and that are still as recorded.

    Only files small enough to be shown are read; a file whose size differs from
    the recorded one (a later run's file of the same name replaced it) is left out.
    """
    found: dict[tuple[int, str], bytes] = {}
    for number, artifacts in enumerate(_artifacts_by_run(records)):
        for artifact in artifacts:
            path, size = artifact.get("path"), artifact.get("size")
            if not isinstance(path, str) or not isinstance(size, int):
                continue
            if size > INLINE_IMAGE_BYTES:
                continue
            data = _read_saved_file(path, INLINE_IMAGE_BYTES + 1)
            if data is None:
                continue
            if len(data) == size:
                found[(number, str(artifact.get("name")))] = data
    return found


def _read_saved_file(path: str, limit: int) -> bytes | None:
    """At most ``limit`` bytes of the regular file at ``path``, never through a link at its end
    (nor blocking on a FIFO put there since); None if it is anything else."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(handle, "rb") as file:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            return None
        return file.read(limit)


def render_transcript_page(
    records: list[Record], *, artifact_bytes: ArtifactBytes | None = None
) -> str:
    """The chat page for ``records`` (as ``solve --transcript`` writes them).

    ``artifact_bytes`` are the runs' files, for the images among them to be shown.
    """
    result = next((record for record in records if record.get("event") == "result"), None)
    task = str(result.get("task", "")) if result else _first_text(records)
    files = _FileShower(_artifacts_by_run(records), artifact_bytes or {})
    cards: list[str] = []
    last_code: str | None = None
    previous_elapsed = 0.0
    for record in records:
        event = record.get("event")
        elapsed = _number(record.get("elapsed"))
        if event == "message":
            code_blocks = _CODE_BLOCK.findall(_text(record))
            if code_blocks:
                last_code = code_blocks[-1]
            cards.append(_message_card(record, elapsed, elapsed - previous_elapsed))
        elif event == "run":
            cards.append(_run_card(record, elapsed, last_code, files.next_run()))
        elif event == "tool_call_attempt":
            cards.append(_attempt_card(record))
        previous_elapsed = elapsed
    body = [f"<h1>{escape(task or 'sandcrew chat')}</h1>"]
    if result is not None:
        body.append(_outcome(result))
    body.append(f'<h2>Chat ({len(cards)} entries)</h2><div id="chat">{"".join(cards)}</div>')
    return html_page(f"{task[:80]} · sandcrew chat", "\n".join(body), style=_STYLE)


def write_transcript_page(
    records: list[Record], path: Path, *, artifact_bytes: ArtifactBytes | None = None
) -> None:
    """Write the chat page for ``records`` to ``path``."""
    try:
        page = render_transcript_page(records, artifact_bytes=artifact_bytes)
        path.write_text(page, encoding="utf-8")
    except OSError as error:
        raise UserError(f"cannot write the HTML page to {path}: {error}") from None


def _outcome(result: Record) -> str:
    solved = bool(result.get("solved"))
    facts = [
        ("Stop reason", str(result.get("stop_reason", ""))),
        ("Rounds", str(result.get("rounds", ""))),
        ("Tokens", str(result.get("total_tokens", ""))),
        ("Duration", f"{_number(result.get('duration')):.2f}s"),
        ("Runs", str(len(result.get("runs") or []))),
    ]
    verdict = '<b class="ok">solved</b>' if solved else '<b class="bad">not solved</b>'
    parts = [f'<section class="outcome" id="outcome"><p>{verdict}</p>', meta_line(facts)]
    if result.get("answer"):
        parts.append(f'<p>Answer:</p><pre class="answer">{escape(str(result["answer"]))}</pre>')
    if result.get("stop_detail"):
        parts.append(f"<p>{escape(str(result['stop_detail']))}</p>")
    if result.get("error"):
        parts.append(f'<p class="bad">Error: {escape(str(result["error"]))}</p>')
    parts.append("</section>")
    return "".join(parts)


def _header(speaker: str, elapsed: float, extra: list[str]) -> str:
    items = [f'<span class="speaker">{escape(speaker)}</span>', f"<span>{elapsed:.2f}s</span>"]
    items += [f"<span>{escape(item)}</span>" for item in extra]
    return f"<header>{''.join(items)}</header>"


def _message_card(record: Record, elapsed: float, took: float) -> str:
    extra = []
    usage = record.get("usage")
    if isinstance(usage, dict):
        extra.append(
            f"model call: {usage.get('prompt_tokens', 0)} in, "
            f"{usage.get('completion_tokens', 0)} out tokens, {took:.2f}s"
        )
    if record.get("terminate"):
        extra.append("ends the chat")
    parts = [_header(str(record.get("sender") or "?"), elapsed, extra)]
    text = _text(record)
    if text:
        parts.append(f"<pre>{escape(text)}</pre>")
    for call in record.get("tool_calls") or []:
        if isinstance(call, dict):
            parts.append(
                f"<p>calls <b>{escape(str(call.get('name', '')))}</b></p>"
                f"<pre>{escape(str(call.get('arguments', '')))}</pre>"
            )
    for outcome in record.get("results") or []:
        if isinstance(outcome, dict):
            parts.append(f"<pre>{escape(str(outcome.get('content', '')))}</pre>")
    data = record.get("data")
    if isinstance(data, dict) and "approved" in data:
        parts.append(_review(data))
    return f'<article class="message">{"".join(parts)}</article>'


def _review(data: Record) -> str:
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


def _artifacts_by_run(records: list[Record]) -> list[list[Record]]:
    """Each run's files as recorded: the result's list (with saved paths) if there is one."""
    runs = [record for record in records if record.get("event") == "run"]
    result = next((record for record in records if record.get("event") == "result"), None)
    summaries = result.get("runs") if result is not None else None
    listed: list[list[Record]] = []
    for number, run in enumerate(runs):
        data = run.get("data")
        artifacts = data.get("artifacts") if isinstance(data, dict) else None
        if isinstance(summaries, list) and number < len(summaries):
            summary = summaries[number]
            if isinstance(summary, dict) and isinstance(summary.get("artifacts"), list):
                artifacts = summary["artifacts"]
        listed.append(
            [item for item in artifacts if isinstance(item, dict)]
            if isinstance(artifacts, list)
            else []
        )
    return listed


class _FileShower:
    """Renders each run's files in turn, keeping the page's images within their budget."""

    def __init__(self, by_run: list[list[Record]], data: ArtifactBytes) -> None:
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

    def _file(self, artifact: Record) -> str:
        name = str(artifact.get("name", ""))
        size = artifact.get("size")
        media_type = str(artifact.get("media_type", ""))
        label = f"out/{name} ({size} bytes, {media_type})"
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
    def _named(label: str, note: str, artifact: Record) -> str:
        path = artifact.get("path")
        notes = [note] if note else []
        notes.append(f"saved to {path}" if isinstance(path, str) else "not saved")
        return f'<p class="artifact">{escape(label)}: {escape("; ".join(notes))}</p>'


def _run_card(record: Record, elapsed: float, code: str | None, files: str = "") -> str:
    raw = record.get("data")
    data: Record = raw if isinstance(raw, dict) else {}
    if data.get("timed_out"):
        status = f"timed out after {_number(data.get('timeout')):g}s"
    elif data.get("oom_killed"):
        status = "killed: out of memory"
    else:
        status = f"exit code {data.get('exit_code', '?')}"
    ok = data.get("exit_code") == 0 and not data.get("timed_out") and not data.get("oom_killed")
    extra = [status, f"ran {_number(data.get('duration')):.2f}s"]
    parts = [_header(str(record.get("sender") or "runner"), elapsed, extra)]
    if code is not None:
        parts.append(f'<p>Code</p><pre class="code">{escape(code)}</pre>')
    parts.append(f'<p>stdout</p><pre class="stdout">{escape(str(data.get("stdout", "")))}</pre>')
    if data.get("stderr"):
        parts.append(f'<p>stderr</p><pre class="stderr">{escape(str(data["stderr"]))}</pre>')
    parts.append(files)
    css = "message run" if ok else "message run failed"
    return f'<article class="{css}" data-exit-code="{escape(str(data.get("exit_code")))}">' + (
        "".join(parts) + "</article>"
    )


def _attempt_card(record: Record) -> str:
    errors = record.get("errors") or []
    listed = "".join(f"<li>{escape(str(error))}</li>" for error in errors)
    reply = json.dumps(record.get("reply"), indent=2, ensure_ascii=False)
    return (
        f'<article class="message attempt"><header><span class="speaker">failed tool call '
        f"attempt {escape(str(record.get('attempt', '')))}</span></header>"
        f"<ul>{listed}</ul><pre>{escape(reply)}</pre></article>"
    )


def _text(record: Record) -> str:
    value = record.get("content", record.get("text"))
    return value if isinstance(value, str) else ""


def _first_text(records: list[Record]) -> str:
    return next((_text(record) for record in records if _text(record)), "")


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0
