"""The bash session's driver: one long-lived ``bash`` whose cwd, variables and functions persist.

Runs as the session's uid. Each cell is written to a file under ``/tmp`` and
sourced by the shell (``. FILE``), so it runs in the shell itself, then the
shell writes its status on a pipe this driver reads, behind a token made for
that cell alone. The cell runs with that pipe closed and its standard input on
``/dev/null``, and the token is in the line the shell read before the cell began,
so a cell cannot end itself early by writing a status (``echo 0 >&5``) nor read
the driver's next line. The shell has its own process group: an interrupt goes to
the whole group (the shell and what it runs), and the shell's ``INT`` trap
returns from the sourced cell, so the cell stops and the shell goes on. A cell
that ends the shell (``exit``) ends this driver too; the supervisor then starts
a fresh one (the state is lost).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import subprocess
from typing import Any

from .session_channel import READY, RESULT, receive_command, send_message

_CELL_FOLDER = "/tmp/.sandcrew-bash"
_STATUS_FD = 5
_STATUS_WINDOW = 8192
_state: dict[str, Any] = {"in_cell": False, "shell": None}


def _on_interrupt(number: int, frame: Any) -> None:
    shell = _state["shell"]
    if _state["in_cell"] and shell is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGINT)


def _read_status(fd: int, token: bytes) -> int | None:
    """The status the shell wrote behind ``token``; ``None`` once the shell is gone.

    Lines without the token (a cell that found the pipe's saved copy) are read and
    dropped; at most a few KiB are held while looking.
    """
    pattern = re.compile(re.escape(token) + rb" (\d{1,3})\n")
    seen = b""
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        seen = (seen + chunk)[-_STATUS_WINDOW:]
        found = pattern.search(seen)
        if found is not None:
            return int(found.group(1))


def main(arguments: list[str]) -> None:
    signal.signal(signal.SIGINT, _on_interrupt)
    os.makedirs(_CELL_FOLDER, 0o700, exist_ok=True)
    read_end, write_end = os.pipe()
    status_read = fcntl.fcntl(read_end, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(read_end)
    if write_end != _STATUS_FD:
        os.dup2(write_end, _STATUS_FD)
        os.close(write_end)
    shell = subprocess.Popen(
        ["bash", "--noprofile", "--norc"],
        stdin=subprocess.PIPE,
        pass_fds=(_STATUS_FD,),
        process_group=0,
        # The channel is this driver's: the shell and its programs never get it.
        close_fds=True,
    )
    os.close(_STATUS_FD)
    _state["shell"] = shell
    assert shell.stdin is not None
    shell.stdin.write(b"trap 'return 130 2>/dev/null' INT\n")
    shell.stdin.flush()
    send_message(READY, {"count": 0, "keep": [shell.pid]})
    count = 0
    while True:
        command = receive_command()
        if command is None:
            return
        count += 1
        path = os.path.join(_CELL_FOLDER, f"cell-{count}.sh")
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(str(command.get("code", "")) + "\n")
        token = os.urandom(16).hex()
        _state["in_cell"] = True
        # One line: the shell has read all of it (the token too) before the cell begins.
        shell.stdin.write(
            f". {path} </dev/null {_STATUS_FD}>&-; "
            f"printf '{token} %s\\n' \"$?\" >&{_STATUS_FD}\n".encode()
        )
        shell.stdin.flush()
        status = _read_status(status_read, token.encode())
        _state["in_cell"] = False
        os.remove(path)
        if status is None:  # the cell ended the shell
            raise SystemExit(shell.wait())
        error = None
        if status == 130:
            error = {"name": "KeyboardInterrupt", "value": "", "traceback": ""}
        elif status != 0:
            error = {"name": "ExitStatus", "value": str(status), "traceback": ""}
        send_message(RESULT, {"seq": command.get("seq"), "count": count, "error": error})
