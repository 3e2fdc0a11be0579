"""A SIGTERM ends a process the way Ctrl-C does, so its containers are removed too.

Kept apart from the container lifecycle: a program installs it before it knows whether
it will start a container, and that should not cost the Docker SDK's import.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType


def treat_sigterm_as_interrupt() -> None:
    """From now on, SIGTERM does what SIGINT (Ctrl-C) does in this process.

    With the default disposition a SIGTERM ends the process at once: no
    ``finally``, no atexit, so a running container would stay until a reaper
    or its watchdog ends it. Handled like SIGINT, a run is cancelled and its
    container removed. Only from the main thread (where Python handles
    signals); a SIGTERM handler set by the application is kept.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_sigterm(number: int, frame: FrameType | None) -> None:
        interrupt = signal.getsignal(signal.SIGINT)
        if callable(interrupt):
            interrupt(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
