"""`solve --html` and `sandcrew transcript --html`: the chat as a page, in headless Chromium."""

from __future__ import annotations

import os
from html.parser import HTMLParser
from pathlib import Path

import pytest

from sandcrew.agents import TextMessage
from sandcrew.sandbox import Artifact, ExecutionResult
from sandcrew.testing import ScriptedModelServer
from sandcrew.transcript import MessageEvent, RunEvent, TranscriptEvent
from sandcrew.transcript_page import INLINE_IMAGE_BYTES, render_transcript_page
from tests.browser import dump_dom, image_widths, screenshot
from tests.crew.conftest import admin_final_turn, coder_turn, review_turn, run_cli

# The program prints markup; the page must show it as text and run none of it.
HOSTILE = (
    "<script>document.body.dataset.pwned = 'script'</script>"
    "<img src=x onerror=\"document.body.dataset.pwned = 'img'\">"
)
PROGRAM = f"print({HOSTILE!r})\nprint(6 * 7)\n"


class _Chat(HTMLParser):
    """Cards, speakers, run exit codes and the body's attributes of a dumped page."""

    def __init__(self) -> None:
        super().__init__()
        self.cards: list[dict[str, str | None]] = []
        self.speakers: list[str] = []
        self.body: dict[str, str | None] = {}
        self.stdout: list[str] = []
        self.images = 0
        self._capture: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        if tag == "article":
            self.cards.append(attributes)
        elif tag == "body":
            self.body = attributes
        elif tag == "img":
            self.images += 1
        elif "speaker" in classes:
            self._capture = "speaker"
        elif tag == "pre" and "stdout" in classes:
            self._capture = "stdout"

    def handle_endtag(self, tag: str) -> None:
        if tag in ("span", "pre"):
            self._capture = None

    def handle_data(self, data: str) -> None:
        if self._capture == "speaker":
            self.speakers.append(data)
        elif self._capture == "stdout":
            self.stdout.append(data)


def _solve(task: str, program: str, answer: str, *options: str) -> None:
    """``sandcrew solve`` against a scripted crew whose coder writes ``program``."""
    with ScriptedModelServer() as server:
        server.add(coder_turn(f"```python\n{program}```"), review_turn(), admin_final_turn(answer))
        completed = run_cli(
            "solve", task, "--base-url", server.base_url, "--model", "scripted", "--quiet",
            *options,
        )  # fmt: skip
    assert completed.returncode == 0, completed.stderr


def _open(page: Path, tmp_path: Path) -> _Chat:
    chat = _Chat()
    chat.feed(dump_dom(page, tmp_path / "profile"))
    return chat


@pytest.mark.docker
def test_solve_html_and_transcript_page_in_chromium(tmp_path: Path) -> None:
    page, transcript = tmp_path / "chat.html", tmp_path / "chat.jsonl"
    _solve(
        "What is 6 times 7?", PROGRAM, "42", "--html", str(page), "--transcript", str(transcript)
    )

    chat = _open(page, tmp_path)
    assert chat.speakers == ["admin", "coder", "reviewer", "runner", "admin"]
    runs = [card for card in chat.cards if "run" in (card.get("class") or "").split()]
    assert [run.get("data-exit-code") for run in runs] == ["0"]
    # The program's markup is text on the page: no element from it, no script run.
    assert "".join(chat.stdout) == HOSTILE + "\n42\n"
    assert chat.images == 0
    assert "data-pwned" not in chat.body
    assert screenshot(page, tmp_path / "profile", tmp_path / "chat.png").startswith(b"\x89PNG")

    again = tmp_path / "again.html"
    rendered = run_cli("transcript", str(transcript), "--html", str(again))
    assert rendered.returncode == 0, rendered.stderr
    assert _open(again, tmp_path).speakers == chat.speakers


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"event": "message"}\n', "line 1 is not a transcript event"),
        ("\nnot json\n", "line 2 is not a transcript event"),
    ],
    ids=["event-without-its-message", "not-json"],
)
def test_transcript_of_a_file_that_is_not_one_is_a_clear_error(
    text: str, expected: str, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(text)

    completed = run_cli("transcript", str(bad), "--html", str(tmp_path / "out.html"))

    assert completed.returncode == 2
    assert expected in completed.stderr
    assert "Traceback" not in completed.stderr


# A 30x20 PNG made with the standard library, and files that only pretend to be images.
PLOTTING_PROGRAM = r"""
import struct, zlib

def chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

raw = b"".join(b"\x00" + b"\xc0\x30\x30" * 30 for _ in range(20))
header = struct.pack(">IIBBBBB", 30, 20, 8, 2, 0, 0, 0)
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
open("out/plot.png", "wb").write(png + chunk(b"IEND", b""))
open("out/x.png", "w").write("<script>document.body.dataset.pwned = 'png'</script>")
open("out/drawing.svg", "w").write(
    '<svg xmlns="http://www.w3.org/2000/svg" onload="document.body.dataset.pwned = 1"/>'
)
print("plotted")
"""


@pytest.mark.docker
def test_the_chat_page_shows_the_plots_and_only_real_images(tmp_path: Path) -> None:
    page, transcript, saved = tmp_path / "chat.html", tmp_path / "chat.jsonl", tmp_path / "out"
    _solve(
        "Plot something.", PLOTTING_PROGRAM, "plotted",
        "--html", str(page), "--transcript", str(transcript), "--out", str(saved),
    )  # fmt: skip

    assert image_widths(page, tmp_path / "profile") == [("out/plot.png", 30)]
    dom = dump_dom(page, tmp_path / "profile")
    not_an_image = "not shown: not a PNG, JPEG, GIF or WebP image; saved to"
    for name, media_type in (("x.png", "image/png"), ("drawing.svg", "image/svg+xml")):
        size = (saved / name).stat().st_size
        assert f"out/{name} ({size} bytes, {media_type}): {not_an_image} {saved / name}" in dom
    assert "data-pwned" not in _open(page, tmp_path).body

    # From the transcript, the images come from the files --out saved.
    again = tmp_path / "again.html"
    rendered = run_cli("transcript", str(transcript), "--html", str(again))
    assert rendered.returncode == 0, rendered.stderr
    assert image_widths(again, tmp_path / "profile") == [("out/plot.png", 30)]
    assert "data-pwned" not in _open(again, tmp_path).body


def test_a_large_image_is_named_not_shown() -> None:
    large = b"\x89PNG\r\n\x1a\n" + bytes(INLINE_IMAGE_BYTES)
    code = TextMessage(sender="coder", content="```python\nprint(1)\n```")
    run = ExecutionResult(
        language="python", exit_code=0, stdout="", stderr="", duration=0.1,
        image="sandcrew/python", run_id="r1", timeout=5, memory_limit_bytes=2**28,
        artifacts=(Artifact(name="big.png", size=len(large), media_type="image/png"),),
    )  # fmt: skip
    events: list[TranscriptEvent] = [
        MessageEvent(message=code),
        RunEvent(sender="runner", content="[RUNNER_RESULT]", run=run),
    ]

    html = render_transcript_page(events, artifact_bytes={(0, "big.png"): large})

    assert "<img" not in html
    assert f"out/big.png ({len(large)} bytes, image/png): not shown: larger than 2 MiB" in html


def test_the_page_reads_back_only_regular_files_never_through_a_link(tmp_path: Path) -> None:
    from sandcrew.transcript_page import saved_artifact_bytes

    png = b"\x89PNG\r\n\x1a\n" + bytes(8)
    (tmp_path / "plot.png").write_bytes(png)
    (tmp_path / "secret").write_bytes(png)
    (tmp_path / "link.png").symlink_to(tmp_path / "secret")
    os.mkfifo(tmp_path / "fifo.png")  # no writer: opening it for reading would block
    artifacts = tuple(
        Artifact(name=name, size=len(png), media_type="image/png", path=str(tmp_path / name))
        for name in ("plot.png", "link.png", "fifo.png")
    )
    run = ExecutionResult(
        language="python", exit_code=0, stdout="", stderr="", duration=0.1,
        image="sandcrew/python", run_id="r1", timeout=5, memory_limit_bytes=2**28,
        artifacts=artifacts,
    )  # fmt: skip
    events: list[TranscriptEvent] = [RunEvent(sender="runner", content="ran", run=run)]

    assert saved_artifact_bytes(events) == {(0, "plot.png"): png}
