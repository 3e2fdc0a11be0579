"""Fenced code blocks out of Markdown, found by a real CommonMark parser."""

from __future__ import annotations

from functools import cache

from markdown_it import MarkdownIt
from pydantic import BaseModel, ConfigDict

from ._languages import normalize_language


class CodeBlock(BaseModel):
    """One fenced code block.

    ``language`` is the normalized first word of the info string (``None`` when the
    fence has no tag); ``info`` is the whole info string as written.
    """

    model_config = ConfigDict(frozen=True)

    code: str
    language: str | None
    info: str


@cache
def _parser() -> MarkdownIt:
    # The CommonMark preset: fences (``` and ~~~, any length), no HTML rendering needed.
    return MarkdownIt("commonmark")


def extract_code_blocks(text: str) -> list[CodeBlock]:
    """Return the fenced code blocks of ``text`` in document order.

    Indented code blocks are ignored: only fences carry an explicit intent to run.
    Fences nested in lists or block quotes are found too.
    """
    blocks: list[CodeBlock] = []
    for token in _parser().parse(text):
        if token.type != "fence":
            continue
        info = token.info.strip()
        first_word = info.split(maxsplit=1)[0] if info else None
        blocks.append(
            CodeBlock(code=token.content, language=normalize_language(first_word), info=info)
        )
    return blocks
