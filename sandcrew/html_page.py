"""One self-contained HTML page: inline style and script, and a policy that runs nothing else.

Every page sandcrew writes (suite reports, chat transcripts) shows untrusted
text: program output, model replies, task ids. Callers escape it with
:func:`html.escape`; as a second line of defence the page's Content Security
Policy allows no network at all and only the page's own inline script (by its
SHA-256 hash), so markup that slipped through still could not run or load.
"""

from __future__ import annotations

import base64
import hashlib
from html import escape

BASE_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5rem; color: #1f2328; }
h1 { font-size: 1.4rem; margin: 0 0 .3rem; } h2 { font-size: 1.1rem; margin-top: 1.6rem; }
.meta { color: #59636e; } .meta span { margin-right: 1.2rem; }
pre { white-space: pre-wrap; word-break: break-word; margin: .3rem 0; max-height: 30rem;
  overflow: auto; background: #f6f8fa; padding: .5rem; }
.pass, .ok { color: #1a7f37; } .fail, .bad { color: #cf222e; }
.error { color: #8250df; } .timeout { color: #9a6700; }
"""


def html_page(title: str, body: str, *, style: str = "", script: str = "") -> str:
    """The whole document: ``body`` is trusted markup; ``title`` is escaped here."""
    script_source = "'none'"
    if script:
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        script_source = f"'sha256-{digest}'"
    policy = (
        f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src {script_source}"
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{escape(policy)}">',
        f"<title>{escape(title)}</title>",
        f"<style>{BASE_STYLE}{style}</style></head><body>",
        body,
    ]
    if script:
        parts.append(f"<script>{script}</script>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def meta_line(facts: list[tuple[str, str]]) -> str:
    """A line of ``name: value`` facts (both escaped)."""
    spans = "".join(f"<span>{escape(name)}: <b>{escape(value)}</b></span>" for name, value in facts)
    return f'<p class="meta">{spans}</p>'
