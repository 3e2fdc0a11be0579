"""The sandbox images: which image runs each language, building them, their state."""

import typing

# Loaded on first use (see sandcrew.core._lazy): `sandcrew` starts without Docker's SDK.
if typing.TYPE_CHECKING:
    from ._images import (
        DEFAULT_IMAGES as DEFAULT_IMAGES,
        BaseSource as BaseSource,
        build_images as build_images,
        list_images as list_images,
    )
else:
    from ..core import lazy_exports as _lazy_exports

    __getattr__, __dir__ = _lazy_exports(
        __name__,
        {
            "DEFAULT_IMAGES": "._images",
            "BaseSource": "._images",
            "build_images": "._images",
            "list_images": "._images",
        },
    )
