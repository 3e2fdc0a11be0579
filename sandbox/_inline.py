"""How bytes travel in JSON documents: base64, up to one cap per entry.

Every JSON document of the product (``run --json``, ``solve --json``, transcripts,
the MCP tools' structured results) carries a file's or a display output's bytes
as base64 when they are at most :data:`INLINE_BYTES`; a larger entry is listed
without its bytes (``data_base64: null`` for a file, its MIME type under
``omitted`` for a display output), and ``--out`` or the Python API give it whole.
"""

from __future__ import annotations

import base64
import binascii

INLINE_BYTES = 1024 * 1024
"""The largest file or display entry whose bytes a JSON document carries (1 MiB)."""


def inline_base64(data: bytes) -> str | None:
    """``data`` as base64 text when it is at most :data:`INLINE_BYTES`, else ``None``."""
    return base64.b64encode(data).decode("ascii") if len(data) <= INLINE_BYTES else None


def from_base64(text: str) -> bytes:
    """The bytes of base64 ``text``; :class:`ValueError` when it is not base64."""
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as error:
        raise ValueError(f"not base64: {error}") from None
