"""The warm process: the command line's libraries imported once, a fork per command.

Started by ``sandcrew warm start`` (``python -m sandcrew.cli._warm_server``), it imports
what the commands need, then listens on this installation's socket (see
:mod:`._handover`). For each command it forks; the fork takes the client's streams,
folder, umask, environment and arguments and runs the command as a ``sandcrew`` process
would, with ``sandcrew run``'s containers labelled with its own pid, so that the reaper
judges them by the fork's life. It ends itself after a while without commands, when
told to stop, and when sandcrew's own files change (an upgrade, an edit), declining that
command so that it runs in its own process with the new code.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import gc
import importlib
import io
import locale
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import NoReturn, TextIO

from sandcrew.cli import _handover, prepare_environment

DEFAULT_IDLE_MINUTES = 30.0
REQUEST_SECONDS = 5.0
"""How long a client may take to send its request; a stalled one does not hold the rest."""
LOCK_SECONDS = 5.0
"""How long a new warm process waits for the installation's lock."""

_MAX_REQUEST = 16 * 1024 * 1024


@dataclass(frozen=True)
class Request:
    kind: str
    folder: str
    umask: int
    streams: tuple[str, str, str]
    arguments: list[str]
    environment: dict[str, str]


@dataclass
class WarmProcess:
    path: str
    idle_seconds: float
    lock: TextIO
    """The lock that makes it the one warm process of the installation (closed by forks:
    a long command must not keep the next warm process from starting)."""
    started: float = field(default_factory=time.time)
    served: int = 0
    watched: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Files whose change ends the warm process (see :func:`_watched_files`)."""

    def describe(self) -> str:
        return (
            f"pid {os.getpid()}, socket {self.path}, up {time.time() - self.started:.0f} s, "
            f"{self.served} commands served, ends after {self.idle_seconds / 60:g} minutes idle"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sandcrew.cli._warm_server")
    parser.add_argument("--idle-minutes", type=float, default=DEFAULT_IDLE_MINUTES)
    options = parser.parse_args(argv)
    serve(idle_seconds=options.idle_minutes * 60)


def serve(*, idle_seconds: float) -> None:
    """Import, listen and serve until idle for ``idle_seconds``, stopped, or out of date."""
    path = _handover.socket_path()
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    if not _handover.folder_is_private(folder):
        raise SystemExit(f"{folder} is not a private folder of this user: not listening there")
    lock = open(path.removesuffix(".sock") + ".lock", "w")  # noqa: SIM115 (held until exit)
    # A warm process that has just ended (its code changed) may still hold it a moment.
    deadline = time.monotonic() + LOCK_SECONDS
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise SystemExit("a warm process already serves this installation") from None
            time.sleep(0.05)
    gc.disable()
    prepare_environment()
    _import_commands()
    warm = WarmProcess(path=path, idle_seconds=idle_seconds, lock=lock, watched=_watched_files())
    gc.freeze()
    gc.enable()
    # Forks end on their own; the kernel reaps them.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    own_socket = _file_identity(path)
    os.chmod(path, 0o600)
    listener.listen(64)
    _say(f"listening on {path}")
    try:
        _serve_requests(listener, warm)
    finally:
        listener.close()
        # Only its own: the next warm process may listen there already.
        if _file_identity(path) == own_socket:
            os.unlink(path)


def _file_identity(path: str) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return None
    return status.st_dev, status.st_ino


def _import_commands() -> None:
    from sandcrew.cli._registry import COMMANDS

    for entry in COMMANDS:
        try:
            importlib.import_module(entry.module)
        except Exception:  # a command whose extra is missing imports it when run
            continue
    # What `run` imports only once it has its result, and what every command's process
    # builds on first use.
    for module in (
        "sandcrew.cli._app",
        "sandcrew.cli._errors",
        "sandcrew.settings",
        "rich.console",
        "rich.markup",
    ):
        importlib.import_module(module)


def _watched_files() -> dict[str, tuple[int, int]]:
    """Every file of sandcrew's imported (an edit), and the first file of every other
    top-level package imported (an upgrade replaces it), with their identity now."""
    watched: dict[str, tuple[int, int]] = {}
    for name, module in list(sys.modules.items()):
        location = getattr(module, "__file__", None)
        own = name == "sandcrew" or name.startswith("sandcrew.")
        if not isinstance(location, str) or not (own or "." not in name):
            continue
        with contextlib.suppress(OSError):
            watched[location] = _identity(location)
    return watched


def _identity(path: str) -> tuple[int, int]:
    status = os.stat(path)
    return status.st_ino, status.st_mtime_ns


def _changed(watched: dict[str, tuple[int, int]]) -> str | None:
    for path, identity in watched.items():
        try:
            if _identity(path) != identity:
                return path
        except OSError:
            return path
    return None


@dataclass(frozen=True)
class _Command:
    """A fork running a caller's command, as the warm process watches it."""

    process: int
    """A pidfd: readable once the fork has ended, and signalled without a pid's reuse."""
    caller: socket.socket
    """The warm process's copy of the caller's connection: readable once the caller is gone."""


def _serve_requests(listener: socket.socket, warm: WarmProcess) -> None:
    last_command = time.monotonic()
    # A caller stopped with its command (Ctrl-Z) and then killed outright would leave the
    # command stopped for ever, its container with it: a command whose caller is gone is
    # continued, and then sees its connection closed and stops as Ctrl-C stops it.
    commands: list[_Command] = []
    try:
        while True:
            # Idle means without a command: `warm status` does not keep it alive.
            left = last_command + warm.idle_seconds - time.monotonic()
            watched: list[socket.socket | int] = [listener]
            watched += [command.caller for command in commands]
            watched += [command.process for command in commands]
            ready = set(select.select(watched, [], [], max(left, 0))[0])
            if not ready:
                _say(f"ending: no command for {warm.idle_seconds / 60:g} minutes")
                return
            for command in list(commands):
                if command.process in ready:  # ended: its caller hears it from the fork
                    _forget(command, commands)
                elif command.caller in ready:
                    with contextlib.suppress(ProcessLookupError):
                        signal.pidfd_send_signal(command.process, signal.SIGCONT)
                    _forget(command, commands)
            if listener not in ready:
                continue
            connection, _ = listener.accept()
            try:
                outcome = _answer(connection, listener, warm)
            except OSError as error:  # this caller's trouble (gone, too slow): the next one
                _say(f"a request failed: {error}")
                outcome = ""
            if isinstance(outcome, _Command):
                commands.append(outcome)
            else:
                connection.close()
            if outcome == "end":
                return
            if outcome != "":
                last_command = time.monotonic()
    finally:
        for command in list(commands):
            _forget(command, commands)


def _forget(command: _Command, commands: list[_Command]) -> None:
    commands.remove(command)
    command.caller.close()
    os.close(command.process)


def _answer(
    connection: socket.socket, listener: socket.socket, warm: WarmProcess
) -> _Command | str:
    """Answer one caller: the command when a fork took it (``"command"`` when it cannot be
    watched), ``"end"`` when the warm process must end, ``""`` otherwise."""
    if _handover.peer_uid(connection) != os.getuid():
        return ""
    connection.settimeout(REQUEST_SECONDS)
    try:
        request, descriptors = _receive(connection)
    except ValueError as error:
        _handover.send_frame(connection, _handover.DECLINED, str(error))
        return ""
    try:
        if request.kind == "stop":
            _handover.send_frame(connection, _handover.STATUS, warm.describe())
            _say("ending: asked to stop")
            return "end"
        # Out of date, it is not warm for `status` either (`warm start` replaces it).
        changed = _changed(warm.watched)
        if changed is not None:
            _handover.send_frame(connection, _handover.DECLINED, f"{changed} changed")
            _say(f"ending: {changed} changed since the start")
            return "end"
        if request.kind == "status":
            _handover.send_frame(connection, _handover.STATUS, warm.describe())
            return ""
        if request.kind != "run" or len(descriptors) != 3:
            _handover.send_frame(connection, _handover.DECLINED, "not a command with 3 streams")
            return ""
        try:
            forked = os.fork()
        except OSError as error:  # the caller runs its command itself
            _handover.send_frame(connection, _handover.DECLINED, f"cannot fork: {error}")
            return ""
        if forked == 0:
            listener.close()
            warm.lock.close()
            _run_command(connection, request, descriptors)
        warm.served += 1
        try:
            return _Command(process=os.pidfd_open(forked), caller=connection)
        except OSError:  # no pidfds (Linux before 5.3): the command is not watched
            return "command"
    finally:
        for descriptor in descriptors:
            os.close(descriptor)


def _say(line: str) -> None:
    """A line of the warm process's log (its stderr, the log file of `warm start`)."""
    sys.stderr.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} pid {os.getpid()}: {line}\n")
    sys.stderr.flush()


def _receive(connection: socket.socket) -> tuple[Request, list[int]]:
    """The request and the descriptors that came with it (closed by the caller)."""
    space = socket.CMSG_SPACE(struct.calcsize("3i"))
    data, ancillary, _flags, _address = connection.recvmsg(65536, space)
    descriptors: list[int] = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(payload) - len(payload) % 4
            descriptors.extend(struct.unpack(f"{usable // 4}i", payload[:usable]))
    try:
        head = _handover.REQUEST_HEAD
        if len(data) < head.size:
            raise ValueError("a request too short for its length")
        (length,) = head.unpack(data[: head.size])
        if length > _MAX_REQUEST:
            raise ValueError("a request over the limit")
        body = data[head.size :]
        rest = _handover.read_exactly(connection, max(length - len(body), 0))
        if rest is None:
            raise ValueError("a request that ended early")
        return _decode((body + rest)[:length]), descriptors
    except BaseException:
        for descriptor in descriptors:
            os.close(descriptor)
        raise


def _decode(body: bytes) -> Request:
    fields = [os.fsdecode(part) for part in body.split(b"\0")]
    if len(fields) < 8 or fields[0] != _handover.PROTOCOL:
        raise ValueError("not a request of this protocol")
    count = int(fields[7])
    arguments = fields[8 : 8 + count]
    if len(arguments) != count:
        raise ValueError("fewer arguments than announced")
    environment = dict(entry.split("=", 1) for entry in fields[8 + count :] if "=" in entry)
    return Request(
        kind=fields[1],
        folder=fields[2],
        umask=int(fields[3]),
        streams=(fields[4], fields[5], fields[6]),
        arguments=arguments,
        environment=environment,
    )


def _run_command(connection: socket.socket, request: Request, descriptors: list[int]) -> NoReturn:
    """The fork's whole life: become the client's command, run it, say its exit code."""
    code = 125
    ended = threading.Event()
    try:
        connection.settimeout(None)
        _handover.send_frame(connection, _handover.STARTED, str(os.getpid()))
    except OSError:
        # The client gave up waiting and runs the command itself.
        os._exit(code)
    try:
        for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, descriptor in enumerate(descriptors):
            os.dup2(descriptor, target)
            os.close(descriptor)
        descriptors.clear()
        os.chdir(request.folder)
        os.umask(request.umask)
        os.environ.clear()
        os.environ.update(request.environment)
        prepare_environment()
        time.tzset()
        with contextlib.suppress(locale.Error):
            locale.setlocale(locale.LC_CTYPE, "")
        sys.stdin, sys.stdout, sys.stderr = (
            _text_stream(number, form) for number, form in enumerate(request.streams)
        )
        for name in ("stdin", "stdout", "stderr"):
            setattr(sys, f"__{name}__", getattr(sys, name))
        sys.argv = ["sandcrew", *request.arguments]
        threading.Thread(
            target=_stop_when_client_leaves, args=(connection, ended), daemon=True
        ).start()
        from sandcrew.cli._app import build_app, run_here

        code = run_here(build_app())
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:  # the client gets an exit code whatever happened
        with contextlib.suppress(Exception):
            import traceback

            traceback.print_exc()
    try:
        _finish()
    except BaseException:  # an exit hook's failure does not change the code
        pass
    finally:
        ended.set()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        with contextlib.suppress(OSError):
            _handover.send_frame(connection, _handover.ENDED, str(code))
        os._exit(code)


def _finish() -> None:
    """What an interpreter's exit does before it ends, as a fork of multiprocessing does it:
    wait for the threads (a container's removal), then run the exit hooks."""
    import atexit

    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()


def _text_stream(number: int, form: str) -> io.TextIOWrapper:
    encoding, errors, line_buffering, write_through = form.rsplit(":", 3)
    mode = "rb" if number == 0 else "wb"
    binary = open(number, mode, closefd=False)  # noqa: SIM115 (lives as long as the fork)
    return io.TextIOWrapper(
        binary,
        encoding=encoding,
        errors=errors,
        line_buffering=line_buffering == "1",
        write_through=write_through == "1",
    )


def _stop_when_client_leaves(connection: socket.socket, ended: threading.Event) -> None:
    """The client went away (killed, its terminal closed): the command stops as Ctrl-C
    stops it, its containers removed."""
    with contextlib.suppress(OSError):
        while connection.recv(4096):
            pass
    if not ended.is_set():
        os.kill(os.getpid(), signal.SIGINT)


if __name__ == "__main__":
    main()
