"""Reading a file a user named: a regular file only, and never more than a cap.

A path can name a FIFO (``open`` waits for a writer that may never come), a device
(``/dev/zero`` never ends, and its size says 0) or a folder; each is refused at
once, and a regular file is read up to one byte past the cap, so a caller can tell
"too large" without holding more than that.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class NotARegularFile(OSError):
    """The path names something other than a regular file (a folder, a FIFO, a device)."""

    def __init__(self, path: str | Path, mode: int) -> None:
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        super().__init__(f"{path} is {kind}")


def read_regular_file(path: str | Path, limit: int, *, follow_link: bool = True) -> bytes:
    """At most ``limit + 1`` bytes of the regular file at ``path``.

    ``follow_link=False`` refuses a link at the end of the path (``ELOOP``). Raises
    :class:`NotARegularFile` for anything but a regular file, ``FileNotFoundError``
    and the other ``OSError`` s of opening and reading as they are.
    """
    # Not blocking: a FIFO opens at once without a writer, and is then refused.
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_link else os.O_NOFOLLOW)
    handle = os.open(path, flags)
    try:
        mode = os.fstat(handle).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFile(path, mode)
    except BaseException:
        os.close(handle)
        raise
    with os.fdopen(handle, "rb") as file:
        # A buffered read(size) returns early only at the end of the file.
        return file.read(limit + 1)
