"""Files in and out of a run: input files from the host, artifacts saved back, and the
size up to which bytes are carried inline in JSON."""

import typing

# Loaded on first use (see sandcrew.core._lazy): `sandcrew` starts without Docker's SDK.
if typing.TYPE_CHECKING:
    from ._files import (
        load_input_files as load_input_files,
    )
    from ._inline import (
        INLINE_BYTES as INLINE_BYTES,
    )
    from ._saving import (
        save_artifacts as save_artifacts,
    )
else:
    from ..core import lazy_exports as _lazy_exports

    __getattr__, __dir__ = _lazy_exports(
        __name__,
        {
            "load_input_files": "._files",
            "INLINE_BYTES": "._inline",
            "save_artifacts": "._saving",
        },
    )
