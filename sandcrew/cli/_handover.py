"""Giving a command to the warm process of this installation, and what the two say.

``sandcrew warm start`` leaves a process that has imported the command line's libraries
(typer, pydantic, Docker's SDK) listening on a Unix socket. A ``sandcrew`` command then
imports only this module: it connects, passes its standard streams (the descriptors
themselves), its arguments, working folder, umask and environment, and waits for the exit
code of a fork of that process, which runs the command exactly as this process would
have. Signals this process gets (Ctrl-C, SIGTERM, SIGHUP) go on to that fork; if this
process dies, the fork's connection ends and it stops the command as Ctrl-C does; Ctrl-Z
stops the fork with this process, and ``fg`` continues both.

The socket is trusted only when it is this user's: its folder is this user's and
closed to others, and the process at the other end runs as this user (SO_PEERCRED),
since the streams and the environment (which may hold keys) go to it. Any doubt, and
the command runs in this process as it always did.

Only the standard library, and little of it: this module is what every command pays.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import sys
import zlib
from typing import TextIO

PROTOCOL = "sandcrew-warm/1"

BYPASS_VARIABLE = "SANDCREW_WARM"
"""``SANDCREW_WARM=0`` runs every command in its own process, warm process or not."""

REQUEST_HEAD = struct.Struct(">I")
"""A request: its payload's length, then the payload (see :func:`encode_request`)."""
# Replies: one tag byte and the payload's length, then the payload.
_REPLY_HEAD = struct.Struct(">cI")
STARTED = b"p"
"""The command's process started; the payload is its pid."""
ENDED = b"x"
"""The command ended; the payload is its exit code."""
DECLINED = b"n"
"""The warm process does not take the command (its code changed); the payload says why."""
STATUS = b"s"
"""The answer to ``status`` or ``stop``: what the warm process is, as text."""

FIRST_REPLY_SECONDS = 10.0
"""How long a command waits for a warm process to take it before it runs by itself."""

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
HELD_SIGNALS = {*FORWARDED_SIGNALS, signal.SIGTSTP, signal.SIGCONT}

_MAX_FRAME = 16 * 1024 * 1024


def runtime_folder() -> str:
    """This user's folder for the warm process's socket: ``$XDG_RUNTIME_DIR/sandcrew``, or
    ``/tmp/sandcrew-UID``."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isabs(base):
        return os.path.join(base, "sandcrew")
    return f"/tmp/sandcrew-{os.getuid()}"


def installation_key() -> str:
    """What names this installation: its interpreter's environment, sandcrew's folder and
    version, Python's version. Another virtual environment has another warm process."""
    import sandcrew

    folder = os.path.dirname(os.path.abspath(sandcrew.__file__))
    return "\0".join((sys.prefix, folder, sandcrew.__version__, sys.version))


def socket_path() -> str:
    """Where this installation's warm process listens."""
    digest = zlib.crc32(installation_key().encode("utf-8", "surrogateescape"))
    return os.path.join(runtime_folder(), f"warm-{digest:08x}.sock")


def folder_is_private(folder: str) -> bool:
    """Whether ``folder`` is a real folder of this user that no one else can write or read."""
    try:
        status = os.lstat(folder)
    except OSError:
        return False
    import stat

    return (
        stat.S_ISDIR(status.st_mode)
        and status.st_uid == os.getuid()
        and status.st_mode & 0o077 == 0
    )


def peer_uid(connection: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket, as the kernel says."""
    credentials = connection.getsockopt(
        socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
    )
    _pid, uid, _gid = struct.unpack("3i", credentials)
    return int(uid)


def send_frame(connection: socket.socket, tag: bytes, payload: str) -> None:
    data = payload.encode("utf-8", "surrogateescape")
    connection.sendall(_REPLY_HEAD.pack(tag, len(data)) + data)


def read_frame(connection: socket.socket) -> tuple[bytes, str] | None:
    """The next reply frame, or None when the connection ended first."""
    head = read_exactly(connection, _REPLY_HEAD.size)
    if head is None:
        return None
    tag, length = _REPLY_HEAD.unpack(head)
    if length > _MAX_FRAME:
        return None
    payload = read_exactly(connection, length)
    if payload is None:
        return None
    return tag, payload.decode("utf-8", "surrogateescape")


def read_exactly(connection: socket.socket, size: int) -> bytes | None:
    """``size`` bytes from ``connection``, or None when it ended first."""
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def encode_request(kind: str, arguments: list[str]) -> bytes:
    """A request as its length and NUL-separated fields (no field of a POSIX process's
    arguments, environment or path can hold a NUL)."""
    streams: list[TextIO | None] = [sys.stdin, sys.stdout, sys.stderr]
    umask = os.umask(0)
    os.umask(umask)
    fields = [
        PROTOCOL,
        kind,
        os.getcwd(),
        str(umask),
        *(_stream_form(stream) for stream in streams),
        str(len(arguments)),
        *arguments,
        *(f"{name}={value}" for name, value in os.environ.items()),
    ]
    payload = b"\0".join(os.fsencode(field) for field in fields)
    return REQUEST_HEAD.pack(len(payload)) + payload


def _stream_form(stream: TextIO | None) -> str:
    if stream is None:
        return "utf-8:strict:0:0"
    return ":".join(
        (
            stream.encoding,
            stream.errors or "strict",
            str(int(stream.line_buffering)),
            str(int(getattr(stream, "write_through", False))),
        )
    )


def _first_command(arguments: list[str]) -> str | None:
    return next((argument for argument in arguments if not argument.startswith("-")), None)


def supported() -> bool:
    """Whether this system tells a Unix socket's peer (Linux's ``SO_PEERCRED``), without
    which no socket is trusted."""
    return hasattr(socket, "SO_PEERCRED") and hasattr(socket, "SCM_RIGHTS")


def connect() -> socket.socket | None:
    """A connection to this installation's warm process, or None when there is none to
    trust."""
    if not supported():
        return None
    path = socket_path()
    if not folder_is_private(os.path.dirname(path)):
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
        if peer_uid(connection) != os.getuid():
            connection.close()
            return None
    except OSError:
        connection.close()
        return None
    return connection


def ask(kind: str) -> str | None:
    """The warm process's answer to ``status`` or ``stop``, or None when there is none."""
    connection = connect()
    if connection is None:
        return None
    with connection:
        try:
            connection.settimeout(FIRST_REPLY_SECONDS)
            connection.sendall(encode_request(kind, []))
            reply = read_frame(connection)
        except OSError:
            return None
    if reply is None or reply[0] != STATUS:
        return None
    return reply[1]


def hand_over(arguments: list[str]) -> int | None:
    """Run ``sandcrew ARGUMENTS`` in this installation's warm process; its exit code, or
    None when no warm process takes it (the caller runs the command itself)."""
    if os.environ.get(BYPASS_VARIABLE) == "0" or _first_command(arguments) == "warm":
        return None
    if any(stream is None for stream in (sys.stdin, sys.stdout, sys.stderr)):
        return None  # a closed stream gets the command's own error, from this process
    connection = connect()
    if connection is None:
        return None
    # Held from the request on, so that none comes before the command's pid is known and
    # none is lost: each is passed on once the handlers below are in place.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        return _run_handed_over(connection, arguments)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _run_handed_over(connection: socket.socket, arguments: list[str]) -> int | None:
    with connection:
        try:
            connection.settimeout(FIRST_REPLY_SECONDS)
            request = encode_request("run", arguments)
            rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("3i", 0, 1, 2))]
            connection.sendmsg([request], rights)
            reply = read_frame(connection)
        except OSError:
            return None
        if reply is None or reply[0] != STARTED:
            return None  # a Ctrl-C held meanwhile meets the command run in this process
        connection.settimeout(None)
        command_pid = int(reply[1])
        for number in FORWARDED_SIGNALS:
            signal.signal(number, lambda received, _frame: _forward(command_pid, received))
        _stop_together(command_pid)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD_SIGNALS)
        try:
            reply = read_frame(connection)
        except OSError:
            reply = None
    if reply is not None and reply[0] == ENDED:
        return int(reply[1])
    sys.stderr.write("sandcrew: the command ended without an exit code (it was killed)\n")
    return 125


def _stop_together(pid: int) -> None:
    """Ctrl-Z stops the command with this process, and ``fg`` (SIGCONT) goes on with both."""

    def on_stop(_number: int, _frame: object) -> None:
        _forward(pid, signal.SIGSTOP)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)  # stopped here until continued

    def on_continue(_number: int, _frame: object) -> None:
        _forward(pid, signal.SIGCONT)
        signal.signal(signal.SIGTSTP, on_stop)

    signal.signal(signal.SIGTSTP, on_stop)
    signal.signal(signal.SIGCONT, on_continue)


def _forward(pid: int, number: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, number)


__all__ = [
    "BYPASS_VARIABLE",
    "DECLINED",
    "ENDED",
    "PROTOCOL",
    "REQUEST_HEAD",
    "STARTED",
    "STATUS",
    "ask",
    "connect",
    "encode_request",
    "folder_is_private",
    "hand_over",
    "peer_uid",
    "read_exactly",
    "read_frame",
    "runtime_folder",
    "send_frame",
    "socket_path",
    "supported",
]
