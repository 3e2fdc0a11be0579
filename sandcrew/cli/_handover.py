"""Giving a command to the warm process of this installation, and what the two say.

``sandcrew warm start`` leaves a process that has imported the command line's libraries
(typer, pydantic, Docker's SDK) listening on a Unix socket. A ``sandcrew`` command then
imports only this module: it connects, passes its standard streams (the descriptors
themselves), its arguments, working folder, umask and environment, and waits for the exit
code of a fork of that process, which runs the command exactly as this process would
have. Signals this process gets (Ctrl-C, SIGTERM, SIGHUP, a terminal's resize) go on to
that fork; if this process dies, the fork's connection ends and it stops the command as
Ctrl-C does; Ctrl-Z stops the fork with this process, and ``fg`` continues both. A command
that a fork could not run as this process would (a descriptor path beyond the three
streams, a background job on its terminal, other interpreter flags) runs here.

The socket is trusted only when it is this user's: its folder is this user's and
closed to others, and the process at the other end runs as this user (SO_PEERCRED),
since the streams and the environment (which may hold keys) go to it. Any doubt, and
the command runs in this process as it always did.

Only the standard library, and little of it: this module is what every command pays.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import socket
import struct
import sys
import zlib
from typing import TextIO

PROTOCOL = "sandcrew-warm/2"

BYPASS_VARIABLE = "SANDCREW_WARM"
"""``SANDCREW_WARM=0`` runs every command in its own process, warm process or not."""

REQUEST_HEAD = struct.Struct(">I")
"""A request: its payload's length, then the payload (see :func:`encode_request`)."""
# Replies: one tag byte and the payload's length, then the payload.
_REPLY_HEAD = struct.Struct(">cI")
STARTED = b"p"
"""The command's process is ready; the payload is its pid. It waits for :data:`PROCEED`."""
PROCEED = b"g"
"""The caller's one byte after :data:`STARTED`: run the command (a caller that gave up
waiting closes the connection instead, and runs the command itself)."""
ENDED = b"x"
"""The command ended; the payload is its exit code, or minus the signal that killed it."""
DECLINED = b"n"
"""The warm process does not take the command (its code changed); the payload says why."""
STATUS = b"s"
"""The answer to ``status`` or ``stop``: what the warm process is, as text."""

FIRST_REPLY_SECONDS = 10.0
"""How long a command waits for a warm process to take it before it runs by itself."""

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGWINCH)
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


def peer_credentials(connection: socket.socket) -> tuple[int, int, int]:
    """The pid, uid and gid of the process at the other end of a Unix socket, as the kernel
    says."""
    credentials = connection.getsockopt(
        socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
    )
    pid, uid, gid = struct.unpack("3i", credentials)
    return int(pid), int(uid), int(gid)


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
        interpreter_state(),
        ",".join(str(int(number)) for number in _ignored_signals()),
        *(_stream_form(stream) for stream in streams),
        str(len(arguments)),
        *arguments,
        *(f"{name}={value}" for name, value in os.environ.items()),
    ]
    payload = b"\0".join(os.fsencode(field) for field in fields)
    return REQUEST_HEAD.pack(len(payload)) + payload


def interpreter_state() -> str:
    """What of a Python process is fixed when it starts, besides its environment: its flags
    (UTF-8 mode, which the locale may switch on, among them) and ``-X`` options. A fork
    of the warm process has the warm process's."""
    flags = sys.flags
    named = [f"{name}={getattr(flags, name)}" for name in _COMPARED_FLAGS]
    options = [f"-X{name}={value}" for name, value in sorted(sys._xoptions.items())]
    warnings = [f"-W{option}" for option in sys.warnoptions]
    return " ".join(named + options + warnings)


def _ignored_signals() -> list[int]:
    """The forwarded signals this process ignores (``nohup`` ignores SIGHUP): not passed
    on, and ignored by the command as by this process."""
    return [number for number in FORWARDED_SIGNALS if signal.getsignal(number) is signal.SIG_IGN]


# Not safe_path: the warm process runs with -P, so that the folder it was started in is not
# on its path (a console script's own path starts at its folder, not the working one).
_COMPARED_FLAGS = (
    "debug",
    "inspect",
    "interactive",
    "optimize",
    "dont_write_bytecode",
    "no_user_site",
    "no_site",
    "ignore_environment",
    "verbose",
    "bytes_warning",
    "quiet",
    "hash_randomization",
    "isolated",
    "dev_mode",
    "utf8_mode",
    "warn_default_encoding",
    "int_max_str_digits",
)


def _stream_form(stream: TextIO | None) -> str:
    """How the stream encodes and buffers: its encoding, errors, line buffering, write
    through, and whether bytes go to the descriptor with no buffer (``-u``)."""
    if stream is None:
        return "utf-8:strict:0:0:0"
    return ":".join(
        (
            stream.encoding,
            stream.errors or "strict",
            str(int(bool(stream.line_buffering))),
            str(int(bool(getattr(stream, "write_through", False)))),
            str(int(isinstance(getattr(stream, "buffer", None), io.RawIOBase))),
        )
    )


def _first_command(arguments: list[str]) -> str | None:
    return next((argument for argument in arguments if not argument.startswith("-")), None)


def _names_other_descriptors(arguments: list[str]) -> bool:
    """Whether an argument is a path to one of this process's descriptors (``<(...)`` in a
    shell gives ``/dev/fd/63``): only the three streams go to the fork."""
    return any(
        "/dev/fd/" in argument or ("/proc/" in argument and "/fd/" in argument)
        for argument in arguments
    )


def _in_background_of_terminal() -> bool:
    """Whether stdin is the terminal of a job control that put this process in the
    background: a read would stop it (SIGTTIN), which the kernel does not do for a fork of
    another session."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) != os.getpgrp()
    except OSError:  # not this process's controlling terminal: no job control applies
        return False


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
        if peer_credentials(connection)[1] != os.getuid():
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
    if _names_other_descriptors(arguments) or _in_background_of_terminal():
        return None
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
            sent = connection.sendmsg([request], rights)  # the descriptors go with the first
            connection.sendall(request[sent:])
            reply = read_frame(connection)
        except OSError:
            return None
        if reply is None or reply[0] != STARTED:
            return None  # a Ctrl-C held meanwhile meets the command run in this process
        command_pid = int(reply[1])
        saved = {number: signal.getsignal(number) for number in HELD_SIGNALS}
        _pass_signals_on(command_pid)
        try:
            connection.sendall(PROCEED)
        except OSError:  # its process ended before it ran anything: the command runs here
            for number, handler in saved.items():
                signal.signal(number, handler)
            return None
        connection.settimeout(None)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD_SIGNALS)
        try:
            reply = read_frame(connection)
        except OSError:
            reply = None
        # The command is over (its pid may soon be another process's): nothing to pass on.
        for number in FORWARDED_SIGNALS:
            signal.signal(number, signal.SIG_IGN)
    if reply is None or reply[0] != ENDED:
        sys.stderr.write("sandcrew: the command ended without an exit code\n")
        return 125
    code = int(reply[1])
    if code < 0:  # killed: this process ends the same way, for its shell to see
        _die_of(-code)
        return 128 - code
    return code


def _die_of(number: int) -> None:
    """End by signal ``number`` as the command did (this returns only for a signal that
    does not end a process)."""
    with contextlib.suppress(ValueError, OSError):
        if number not in (signal.SIGKILL, signal.SIGSTOP):  # those have no handler or mask
            signal.signal(number, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {number})
        os.kill(os.getpid(), number)


def _pass_signals_on(pid: int) -> None:
    """The command gets the signals this process gets (but those it ignores); Ctrl-Z stops
    the command with this process, and ``fg`` (SIGCONT) goes on with both."""
    ending: list[int] = []
    stop_ignored = signal.getsignal(signal.SIGTSTP) is signal.SIG_IGN  # as its own process

    def on_signal(number: int, _frame: object) -> None:
        if number != signal.SIGWINCH:
            ending.append(number)
        _forward(pid, number)

    for number in FORWARDED_SIGNALS:
        if signal.getsignal(number) is not signal.SIG_IGN:
            signal.signal(number, on_signal)

    def on_stop(_number: int, _frame: object) -> None:
        _forward(pid, signal.SIGSTOP)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)  # stopped here until continued

    def on_continue(_number: int, _frame: object) -> None:
        if _in_background_of_terminal() and not ending:
            # Continued in the background (`bg`): the command would read the terminal away
            # from the shell, where a process of the job would be stopped (SIGTTIN). Both stay
            # stopped until continued in the foreground (`fg`), which comes back here. Not
            # when told to end (`kill %1` sends SIGTERM, then SIGCONT): it must go on to end.
            os.kill(os.getpid(), signal.SIGSTOP)
            return
        _forward(pid, signal.SIGCONT)
        if not stop_ignored:
            signal.signal(signal.SIGTSTP, on_stop)

    if not stop_ignored:
        signal.signal(signal.SIGTSTP, on_stop)
    signal.signal(signal.SIGCONT, on_continue)


def _forward(pid: int, number: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, number)


__all__ = [
    "BYPASS_VARIABLE",
    "DECLINED",
    "ENDED",
    "PROCEED",
    "PROTOCOL",
    "REQUEST_HEAD",
    "STARTED",
    "STATUS",
    "ask",
    "connect",
    "encode_request",
    "folder_is_private",
    "hand_over",
    "interpreter_state",
    "peer_credentials",
    "read_exactly",
    "read_frame",
    "runtime_folder",
    "send_frame",
    "socket_path",
    "supported",
]
