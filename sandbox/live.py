"""Output as it comes: the callback a run or a cell calls with each piece of output."""

import typing

# Loaded on first use (see sandcrew.core._lazy): `sandcrew` starts without Docker's SDK.
if typing.TYPE_CHECKING:
    from ._live import (
        OutputCallback as OutputCallback,
        tell_at_end as tell_at_end,
    )
else:
    from ..core import lazy_exports as _lazy_exports

    __getattr__, __dir__ = _lazy_exports(
        __name__,
        {
            "OutputCallback": "._live",
            "tell_at_end": "._live",
        },
    )
