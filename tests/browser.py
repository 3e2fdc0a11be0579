"""Headless Chromium (Debian's `chromium` package) for the tests of HTML pages."""

from __future__ import annotations

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
