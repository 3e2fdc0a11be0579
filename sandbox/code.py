"""The code in a model's reply: its fenced blocks and the languages they name."""

import typing

# Loaded on first use (see sandcrew.core._lazy): `sandcrew` starts without Docker's SDK.
if typing.TYPE_CHECKING:
    from ._extract import (
        CodeBlock as CodeBlock,
        extract_code_blocks as extract_code_blocks,
    )
    from ._languages import (
        SUPPORTED_LANGUAGES as SUPPORTED_LANGUAGES,
        normalize_language as normalize_language,
    )
else:
    from ..core import lazy_exports as _lazy_exports

    __getattr__, __dir__ = _lazy_exports(
        __name__,
        {
            "CodeBlock": "._extract",
            "extract_code_blocks": "._extract",
            "SUPPORTED_LANGUAGES": "._languages",
            "normalize_language": "._languages",
        },
    )
