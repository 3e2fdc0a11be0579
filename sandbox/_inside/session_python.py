"""The Python session's driver: IPython's ``InteractiveShell`` on the cell channel.

Runs as the session's uid (not as root, and with the image's site-packages, so
IPython is imported here and nowhere else in this package). IPython gives the
semantics people expect of a notebook: the last expression of a cell is
displayed, ``display()`` and rich reprs (``_repr_html_``, ``_repr_png_``,
pandas) produce MIME bundles, magics work, and with matplotlib installed its
figures are shown as PNG at the end of a cell or on ``plt.show()`` (the inline
backend of ``matplotlib-inline``, which IPython depends on). ipykernel and
jupyter_client would give the same shell behind ZMQ sockets, which the host
cannot reach in a container without a network; this driver speaks the
supervisor's pipe channel instead (:mod:`.session_channel`).

SIGINT raises ``KeyboardInterrupt`` only while a cell runs; one that comes
between cells (a late interrupt) is ignored, so it never breaks the channel.
"""

from __future__ import annotations

import base64
import contextlib
import io
import os
import signal
import sys
from typing import Any

from .session_channel import (
    COMMANDS_FD,
    DISPLAY,
    MESSAGES_FD,
    READY,
    RESULT,
    clean_error,
    encode_message,
    receive_command,
    send_encoded,
    send_message,
)

_BINARY_PREFIXES = ("image/", "application/pdf", "audio/", "video/")
_state: dict[str, Any] = {"in_cell": False, "display_limit": None}


def _on_interrupt(number: int, frame: Any) -> None:
    if _state["in_cell"]:
        raise KeyboardInterrupt


def _bundle(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    """A display output as the channel carries it: text as is, binary data base64-encoded."""
    shown: dict[str, str] = {}
    binary: list[str] = []
    for mime, value in data.items():
        if isinstance(value, (bytes, bytearray)):
            shown[mime] = base64.b64encode(bytes(value)).decode("ascii")
            binary.append(mime)
        elif isinstance(value, str):
            shown[mime] = value
            if mime.startswith(_BINARY_PREFIXES) and not mime.startswith("image/svg"):
                binary.append(mime)  # IPython's convention: binary reprs given as base64 text
        else:
            import json

            try:
                shown[mime] = json.dumps(value)
            except (TypeError, ValueError):
                shown[mime] = str(value)
    return {"kind": kind, "data": shown, "binary": binary}


def _flush() -> None:
    # The originals too: a cell that replaced sys.stdout leaves its lines buffered there.
    # A cell may have set any of the four to None or to anything without flush().
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()  # type: ignore[union-attr]


def _send_display(kind: str, data: dict[str, Any]) -> None:
    _flush()  # what the cell printed before the display comes first
    message = encode_message(DISPLAY, _bundle(kind, data))
    limit = _state["display_limit"]
    if isinstance(limit, int) and len(message) > limit:
        # Over what the cell may show: said, not sent (the supervisor would drop it anyway).
        send_message(DISPLAY, {"kind": kind, "dropped": len(message)})
        return
    send_encoded(message)


def _make_shell() -> Any:
    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    class ChannelDisplayPublisher(DisplayPublisher):  # type: ignore[misc]
        def publish(  # type: ignore[no-untyped-def]
            self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs
        ) -> None:
            _send_display("display", data)

        def clear_output(self, wait: bool = False) -> None:
            pass

    class ChannelDisplayHook(DisplayHook):  # type: ignore[misc]
        def write_output_prompt(self) -> None:
            pass

        def write_format_data(self, format_dict: Any, md_dict: Any = None) -> None:
            _send_display("result", format_dict)

        def finish_displayhook(self) -> None:
            pass

    class SessionShell(InteractiveShell):  # type: ignore[misc]
        last_error: dict[str, str] | None = None

        def showtraceback(self, exc_tuple: Any = None, *args: Any, **kwargs: Any) -> None:
            # An interrupt is reported at once: formatting a traceback can take
            # seconds on a busy machine, and the interrupt's grace period is short.
            kind = exc_tuple[0] if exc_tuple else sys.exc_info()[0]
            if kind is KeyboardInterrupt:
                self.last_error = {
                    "name": "KeyboardInterrupt",
                    "value": "",
                    "traceback": "KeyboardInterrupt: the cell was interrupted",
                }
                return
            super().showtraceback(exc_tuple, *args, **kwargs)

        def _showtraceback(self, etype: Any, evalue: Any, stb: Any) -> None:
            text = stb if isinstance(stb, str) else "\n".join(stb)
            self.last_error = {
                "name": getattr(etype, "__name__", str(etype)),
                "value": str(evalue),
                "traceback": text,
            }

    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "NoColor"
    return SessionShell.instance(
        config=config,
        display_pub_class=ChannelDisplayPublisher,
        displayhook_class=ChannelDisplayHook,
    )


def _standard_streams() -> None:
    # Line-buffered, as on a terminal: the host sees each line (or ``\r``) as the cell
    # prints it, in one piece rather than one piece per write (print writes its end apart).
    for number, name in ((1, "stdout"), (2, "stderr")):
        stream = io.TextIOWrapper(
            io.FileIO(number, "w", closefd=False),
            encoding="utf-8",
            errors="backslashreplace",
            line_buffering=True,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _restore_streams(saved: dict[int, int]) -> None:
    """Put the pipes back on 1 and 2 if the last cell closed or replaced them."""
    for number, copy in saved.items():
        try:
            same = os.path.sameopenfile(number, copy)
        except OSError:
            same = False
        if not same:
            try:
                os.dup2(copy, number)
                os.set_blocking(number, True)
            except OSError:
                pass


def _reap_children() -> None:
    """Collect the children an interrupted cell left (the supervisor killed them)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


class Contexts:
    """Named namespaces of the one shell: a context is a fresh ``__main__`` of its own.

    The default context (``None``) is the shell's own namespace; another is made on
    its first cell, started afresh when asked, and forgotten when dropped.
    """

    def __init__(self, shell: Any) -> None:
        self._shell = shell
        self._namespaces: dict[str | None, tuple[Any, dict[str, Any]]] = {
            None: (shell.user_module, shell.user_ns)
        }

    def enter(self, command: dict[str, Any]) -> None:
        """Make the command's context the shell's namespace for its cell."""
        import types

        for name in command.get("drop") or ():
            if isinstance(name, str):
                self._namespaces.pop(name, None)
        name = command.get("context")
        if not isinstance(name, str):
            name = None
        if name is not None and (command.get("fresh") or name not in self._namespaces):
            module = types.ModuleType("__main__")
            self._namespaces[name] = (module, module.__dict__)
            self._shell.user_module, self._shell.user_ns = module, module.__dict__
            self._shell.init_user_ns()
            return
        self._shell.user_module, self._shell.user_ns = self._namespaces[name]


def _leave_the_channel() -> None:
    """In a process a cell forked: the channel is the interpreter's, not the child's."""
    for descriptor in (COMMANDS_FD, MESSAGES_FD):
        with contextlib.suppress(OSError):
            os.close(descriptor)


def main(arguments: list[str]) -> None:
    sys.dont_write_bytecode = True
    sys.argv = [""]
    # Programs a cell starts, and processes it forks, do not get the channel: the supervisor
    # checks before each cell that only the interpreter holds it.
    for descriptor in (COMMANDS_FD, MESSAGES_FD):
        os.set_inheritable(descriptor, False)
    os.register_at_fork(after_in_child=_leave_the_channel)
    _standard_streams()
    saved = {number: os.dup(number) for number in (1, 2)}
    signal.signal(signal.SIGINT, _on_interrupt)
    shell = _make_shell()
    contexts = Contexts(shell)
    send_message(READY, {"count": shell.execution_count})
    while True:
        command = receive_command()
        if command is None:
            return
        _restore_streams(saved)
        _state["display_limit"] = command.get("display_limit")
        contexts.enter(command)
        shell.last_error = None
        count = shell.execution_count
        _state["in_cell"] = True
        try:
            shell.run_cell(str(command.get("code", "")), store_history=True)
            _state["in_cell"] = False
        except KeyboardInterrupt:  # a repeated interrupt while the cell was ending
            _state["in_cell"] = False
            if shell.last_error is None:
                shell.last_error = {
                    "name": "KeyboardInterrupt",
                    "value": "",
                    "traceback": "KeyboardInterrupt: the cell was interrupted",
                }
        if shell.last_error is not None and shell.last_error["name"] == "KeyboardInterrupt":
            _reap_children()
        _flush()
        send_message(
            RESULT,
            {"seq": command.get("seq"), "count": count, "error": clean_error(shell.last_error)},
        )
