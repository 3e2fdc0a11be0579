"""``async with`` for what sandcrew starts and must close.

Sandboxes, batch sandboxes, the MCP toolbox and the framework adapters all start on entry
and close on exit whatever ends the block; they inherit that here instead of each writing
the same two methods.
"""

from __future__ import annotations

import abc
from typing import Self


class AsyncResource(abc.ABC):
    """``async with`` awaits :meth:`start`, then :meth:`aclose` whatever ends the block."""

    @abc.abstractmethod
    async def start(self) -> object:
        """Get ready (a no-op where there is nothing to start); safe to call twice."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Release everything held; closing twice is fine."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
