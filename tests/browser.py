"""Headless Chromium (Debian's `chromium` package) for the tests of HTML pages."""

from __future__ import annotations

import base64
import hashlib
import html as html_module
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

_HEADLESS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--mute-audio")


def chromium() -> str:
    """The browser binary; a missing one fails the test with the fix."""
    found = shutil.which("chromium")
    if found is None:
        pytest.fail("Chromium is missing: `apt-get install chromium` (Debian's package)")
    return found


def dump_dom(page: Path, profile: Path, view: str = "") -> str:
    """The DOM of ``page`` (opened from disk, with ``#view``) after its script ran."""
    url = page.resolve().as_uri() + (f"#{view}" if view else "")
    dumped = subprocess.run(
        [chromium(), *_HEADLESS, f"--user-data-dir={profile}", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return dumped.stdout


def screenshot(page: Path, profile: Path, out: Path) -> bytes:
    """A PNG of ``page`` as Chromium renders it."""
    subprocess.run(
        [chromium(), *_HEADLESS, f"--user-data-dir={profile}", f"--screenshot={out}",
         "--window-size=1280,1600", page.resolve().as_uri()],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    return out.read_bytes()


# Reports each image's alt text and natural width (0: the browser could not decode it).
_IMAGE_PROBE = (
    "addEventListener('load', () => { document.body.dataset.images = JSON.stringify("
    "[...document.images].map((image) => [image.alt, image.naturalWidth])); });"
)


def image_widths(page: Path, profile: Path) -> list[tuple[str, int]]:
    """``(alt, naturalWidth)`` of each image of ``page`` once Chromium has loaded it.

    A copy of the page gets a probe script, allowed by its hash; the page's policy is
    otherwise unchanged, so images load (or not) exactly as on the page itself.
    """
    html = page.read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(_IMAGE_PROBE.encode()).digest()).decode()
    no_script = "script-src &#x27;none&#x27;"
    assert no_script in html, "the page is expected to allow no script"
    probe = html.replace(no_script, f"script-src &#x27;sha256-{digest}&#x27;", 1).replace(
        "</body>", f"<script>{_IMAGE_PROBE}</script></body>", 1
    )
    copy = page.with_name(f"{page.stem}-probe.html")
    copy.write_text(probe, encoding="utf-8")
    match = re.search(r'data-images="([^"]*)"', dump_dom(copy, profile))
    assert match is not None, "the probe did not run"
    return [(str(alt), int(width)) for alt, width in json.loads(html_module.unescape(match[1]))]
