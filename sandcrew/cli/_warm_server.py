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
import resource
import select
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
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
    interpreter: str
    """The caller's :func:`._handover.interpreter_state`."""
    ignored: tuple[int, ...]
    """The signals the caller ignores (``nohup``): its command ignores them too."""
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
    interpreter: str = field(default_factory=_handover.interpreter_state)
    python_variables: dict[str, str] = field(default_factory=dict)
    """The ``PYTHON*`` variables it started with: read by the interpreter at its start only."""
    confinement: list[str] = field(default_factory=lambda: _confinement("self"))
    """What confines it (see :func:`_confinement`): a caller confined otherwise is declined."""

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
    python_variables = _python_variables(os.environ)
    gc.disable()
    prepare_environment()
    _import_commands()
    warm = WarmProcess(
        path=path,
        idle_seconds=idle_seconds,
        lock=lock,
        watched=_watched_files(),
        python_variables=python_variables,
    )
    gc.freeze()
    gc.enable()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    own_socket = _file_identity(path)
    os.chmod(path, 0o600)
    listener.listen(64)
    _say(f"listening on {path}")

    def stop_listening() -> None:
        listener.close()
        # Only its own: the next warm process may listen there already.
        if _file_identity(path) == own_socket:
            os.unlink(path)
        lock.close()  # the next warm process may start while these commands end

    commands: list[_Command] = []
    try:
        _serve_requests(listener, warm, commands)
        stop_listening()
        # The commands it runs go on to their end, watched as before (a caller killed
        # outright while its command is stopped, a command killed outright).
        while commands:
            _watch(commands, _poll(commands, None, [], _POLL_UNWATCHED_SECONDS))
    finally:
        stop_listening()
        for command in list(commands):
            _forget(command, commands)


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


def _python_variables(environment: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    return {name: value for name, value in environment.items() if name.startswith("PYTHON")}


def _watched_files() -> dict[str, tuple[int, int]]:
    """Every Python file of sandcrew's, imported or not (an edit; a fork imports some
    later), and the first file of every other top-level package imported (an upgrade
    replaces it), with their identity now."""
    import sandcrew

    watched: dict[str, tuple[int, int]] = {}
    own_folder = os.path.dirname(os.path.abspath(str(sandcrew.__file__)))
    for folder, _folders, names in os.walk(own_folder, followlinks=True):
        for name in names:
            if name.endswith(".py"):
                location = os.path.join(folder, name)
                with contextlib.suppress(OSError):
                    watched[location] = _identity(location)
    for name, module in list(sys.modules.items()):
        first_file = getattr(module, "__file__", None)
        if isinstance(first_file, str) and "." not in name and name != "sandcrew":
            with contextlib.suppress(OSError):
                watched[first_file] = _identity(first_file)
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


@dataclass
class _Command:
    """A fork running a caller's command, as the warm process watches it."""

    pid: int
    process: int | None
    """A pidfd (None where the kernel has none): readable once the fork has ended, and
    signalled without a pid's reuse."""
    caller: socket.socket
    """The warm process's copy of the caller's connection: readable once the caller is
    gone; the fork's exit code goes on it when the fork was killed."""
    caller_gone: bool = False


_POLL_UNWATCHED_SECONDS = 1.0
"""How often forks without a pidfd are looked for among the ended."""
_ACCEPT_PAUSE_SECONDS = 0.1
"""After a failed accept (out of descriptors, say), before the next."""
_FORK_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGWINCH}
"""Held around each fork: a fork meets them only once its own handlers are in place."""


def _serve_requests(listener: socket.socket, warm: WarmProcess, commands: list[_Command]) -> None:
    """Serve callers until idle, stopped or out of date; ``commands``: those running.

    Requests are read as their bytes come, each by its own deadline: a caller that sends
    nothing holds one of the pending places, never the warm process."""
    last_activity = time.monotonic()
    pending: list[_Pending] = []
    try:
        while True:
            now = time.monotonic()
            for late in [caller for caller in pending if caller.deadline <= now]:
                _say("a request failed: not whole in time")
                _decline(late, "not whole in time")
                pending.remove(late)
                late.close()
            # Idle means no command running or coming and none for a while: `warm status`
            # does not count. While requests come, only their deadlines wake it.
            if pending:
                timeout: float | None = min(caller.deadline for caller in pending) - now
            else:
                timeout = None if commands else last_activity + warm.idle_seconds - now
            ready = _poll(commands, listener, pending, timeout)
            if _watch(commands, ready):
                last_activity = time.monotonic()
            for caller in [caller for caller in pending if caller.connection.fileno() in ready]:
                outcome = _answer_when_whole(caller, listener, pending, warm, commands)
                if outcome is None:
                    continue
                pending.remove(caller)
                if isinstance(outcome, _Command):
                    commands.append(outcome)
                    last_activity = time.monotonic()
                else:
                    caller.close()
                if outcome == "end":
                    return
            if listener.fileno() in ready:
                taken = _accept(listener)
                if taken is not None:
                    if len(pending) >= _MAX_PENDING:  # the one waiting longest makes way
                        pending.pop(0).close()
                    pending.append(taken)
            elif (
                not pending
                and not commands
                and time.monotonic() - last_activity >= warm.idle_seconds
            ):
                _say(f"ending: no command for {warm.idle_seconds / 60:g} minutes")
                return
    finally:
        for caller in pending:
            caller.close()


_MAX_PENDING = 32
"""Callers whose requests are still coming, at most (each holds a descriptor or four)."""
_ANCILLARY_SPACE = socket.CMSG_SPACE(struct.calcsize("3i"))


@dataclass
class _Pending:
    """A caller whose request is still coming."""

    connection: socket.socket
    deadline: float
    data: bytearray = field(default_factory=bytearray)
    descriptors: list[int] = field(default_factory=list)
    """The streams that came with it (the warm process's copies, closed once answered)."""

    def close_descriptors(self) -> None:
        for descriptor in self.descriptors:
            os.close(descriptor)
        self.descriptors.clear()

    def close(self) -> None:
        self.close_descriptors()
        self.connection.close()

    def wait_no_longer_than_its_deadline(self) -> None:
        """Blocking sends and reads to it end by its deadline (a moment, if it is past)."""
        self.connection.settimeout(max(self.deadline - time.monotonic(), 0.001))


def _accept(listener: socket.socket) -> _Pending | None:
    """The next caller, if it is this user's."""
    try:
        connection, _ = listener.accept()
    except OSError as error:
        _say(f"cannot take a caller: {error}")
        time.sleep(_ACCEPT_PAUSE_SECONDS)
        return None
    try:
        if _handover.peer_credentials(connection)[1] == os.getuid():
            connection.setblocking(False)
            return _Pending(connection, time.monotonic() + REQUEST_SECONDS)
    except OSError:
        pass
    connection.close()
    return None


def _answer_when_whole(
    caller: _Pending,
    listener: socket.socket,
    pending: list[_Pending],
    warm: WarmProcess,
    commands: list[_Command],
) -> _Command | str | None:
    """What :func:`_answer` made of the caller's request (see there), once it is whole; None
    while it is still coming."""
    try:
        request = _read_some(caller)
    except BlockingIOError:
        return None
    except ValueError as error:
        _decline(caller, str(error))
        return ""
    except OSError as error:  # this caller's trouble (gone): the next one
        _say(f"a request failed: {error}")
        return ""
    if request is None:
        return None
    try:
        caller.wait_no_longer_than_its_deadline()
        return _answer(caller, request, listener, pending, warm, commands)
    except OSError as error:
        _say(f"a request failed: {error}")
        return ""
    finally:
        caller.close_descriptors()


def _decline(caller: _Pending, reason: str) -> None:
    """Tell a caller whose request is not taken why, within what is left of its time (a
    word if it listens, never a wait past its deadline)."""
    with contextlib.suppress(OSError):
        caller.wait_no_longer_than_its_deadline()
        _handover.send_frame(caller.connection, _handover.DECLINED, reason)


def _read_some(caller: _Pending) -> Request | None:
    """What the caller has sent so far added to its request: the request once whole."""
    data, ancillary, _flags, _address = caller.connection.recvmsg(65536, _ANCILLARY_SPACE)
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(payload) - len(payload) % 4
            caller.descriptors.extend(struct.unpack(f"{usable // 4}i", payload[:usable]))
    if len(caller.descriptors) > 3:
        raise ValueError("more descriptors than the 3 streams")
    if not data:
        raise ValueError("a request that ended early")
    caller.data += data
    head = _handover.REQUEST_HEAD
    if len(caller.data) < head.size:
        return None
    (length,) = head.unpack_from(caller.data)
    if length > _MAX_REQUEST:
        raise ValueError("a request over the limit")
    if len(caller.data) < head.size + length:
        return None
    return _decode(bytes(caller.data[head.size : head.size + length]))


def _poll(
    commands: list[_Command],
    listener: socket.socket | None,
    pending: list[_Pending],
    timeout: float | None,
) -> set[int]:
    """The descriptors ready within ``timeout`` seconds (None: until one is): the listener,
    more of a pending request, a caller's hang-up, a fork's end. Forks without a pidfd are
    looked at every second."""
    poller = select.poll()
    if listener is not None:
        poller.register(listener, select.POLLIN)
    for caller in pending:
        poller.register(caller.connection, select.POLLIN)
    for command in commands:
        if not command.caller_gone:
            # Its hang-up only: what the caller sends is the fork's to read.
            poller.register(command.caller, select.POLLRDHUP)
        if command.process is not None:
            poller.register(command.process, select.POLLIN)
    if any(command.process is None for command in commands):
        timeout = min(timeout or _POLL_UNWATCHED_SECONDS, _POLL_UNWATCHED_SECONDS)
    milliseconds = None if timeout is None else max(timeout, 0) * 1000
    return {descriptor for descriptor, _event in poller.poll(milliseconds)}


def _watch(commands: list[_Command], ready: set[int]) -> bool:
    """Continue the command of a caller that is gone (it may be stopped: it then sees its
    connection closed and stops as on Ctrl-C), and forget those that ended; whether any
    ended."""
    running = len(commands)
    for command in list(commands):
        if command.caller.fileno() in ready and not command.caller_gone:
            command.caller_gone = True
            if command.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(command.process, signal.SIGCONT)
        _reap(command, commands)
    return len(commands) < running


def _reap(command: _Command, commands: list[_Command]) -> None:
    """If the fork has ended: its zombie goes, and a caller still there hears how it ended
    when it could not say so itself (killed)."""
    try:
        ended = _ended(command)
    except ChildProcessError:  # reaped already
        _forget(command, commands)
        return
    if ended is None:
        return
    if ended.si_code in (os.CLD_KILLED, os.CLD_DUMPED) and not command.caller_gone:
        with contextlib.suppress(OSError):
            command.caller.setblocking(False)
            _handover.send_frame(command.caller, _handover.ENDED, str(-ended.si_status))
    _forget(command, commands)


def _ended(command: _Command) -> os.waitid_result | None:
    """How the fork ended, its zombie gone; None while it runs."""
    if command.process is not None:
        try:
            return os.waitid(os.P_PIDFD, command.process, os.WEXITED | os.WNOHANG)
        except ChildProcessError:
            raise
        except OSError:  # a kernel that cannot wait on a pidfd (before 5.4): by its pid
            pass
    return os.waitid(os.P_PID, command.pid, os.WEXITED | os.WNOHANG)


def _forget(command: _Command, commands: list[_Command]) -> None:
    commands.remove(command)
    command.caller.close()
    if command.process is not None:
        os.close(command.process)


def _answer(
    caller: _Pending,
    request: Request,
    listener: socket.socket,
    pending: list[_Pending],
    warm: WarmProcess,
    commands: list[_Command],
) -> _Command | str:
    """Answer one caller's whole request: the command when a fork took it, ``"end"`` when
    the warm process must end, ``""`` otherwise."""
    connection, descriptors = caller.connection, caller.descriptors
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
    unlike = _unlike_the_warm_process(connection, request, warm)
    if unlike is not None:
        _handover.send_frame(connection, _handover.DECLINED, unlike)
        return ""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _FORK_SIGNALS)
    try:
        forked = os.fork()
    except OSError as error:  # the caller runs its command itself
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        _handover.send_frame(connection, _handover.DECLINED, f"cannot fork: {error}")
        return ""
    if forked == 0:
        # Nothing of the warm process's own runs in a fork from here on, whatever
        # happens: it ends here.
        try:
            for command in commands:
                command.caller.close()
                if command.process is not None:
                    os.close(command.process)
            for other in pending:  # another caller's streams: its end of file is not ours
                if other is not caller:
                    other.close()
            listener.close()
            warm.lock.close()
            _run_command(connection, request, descriptors)
        finally:
            os._exit(125)
    signal.pthread_sigmask(signal.SIG_SETMASK, held)
    warm.served += 1
    try:
        process: int | None = os.pidfd_open(forked)
    except OSError:  # no pidfds (Linux before 5.3): looked for by its pid
        process = None
    return _Command(pid=forked, process=process, caller=connection)


def _unlike_the_warm_process(
    connection: socket.socket, request: Request, warm: WarmProcess
) -> str | None:
    """Why a fork could not run the command as the caller's own process would, if so (what
    a fork can take from the caller, it takes: see :func:`_become_like_the_caller`)."""
    caller, _uid, _gid = _handover.peer_credentials(connection)
    theirs = _confinement(str(caller))
    if not theirs or theirs != warm.confinement:
        return (
            "the caller's groups, capabilities, namespaces or root differ from the warm process's"
        )
    if request.interpreter != warm.interpreter:
        return "the caller's interpreter has other flags"
    if _python_variables(request.environment) != warm.python_variables:
        return "the caller's PYTHON* variables differ (the interpreter reads them at its start)"
    return None


def _say(line: str) -> None:
    """A line of the warm process's log (its stderr, the log file of `warm start`)."""
    sys.stderr.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} pid {os.getpid()}: {line}\n")
    sys.stderr.flush()


def _confinement(process: str) -> list[str]:
    """What confines a process and a fork cannot take on: its user and groups, capabilities,
    no-new-privileges and seccomp filters (as its status shows them), its security labels
    (AppArmor, SELinux, Smack), its namespaces and its root folder (empty when it is gone).
    A caller in a sandbox of its own (bwrap, a mount namespace, dropped capabilities, a
    seccomp filter of its own) differs, and runs its command in its own process. Landlock
    leaves no trace another process can read (see docs/security.md)."""
    folder = f"/proc/{process}"
    try:
        with open(f"{folder}/status", encoding="ascii", errors="replace") as status:
            facts = [line for line in status if line.startswith(_CONFINING_STATUS)]
        root = os.stat(f"{folder}/root")
    except OSError:
        return []
    facts += [_fact(f"ns/{kind}", os.readlink, folder) for kind in _NAMESPACES]
    facts += [_fact(f"attr/{label}", _read_bytes, folder) for label in _SECURITY_LABELS]
    return [*facts, f"root {root.st_dev}:{root.st_ino}"]


def _fact(name: str, read: Callable[[str], object], folder: str) -> str:
    """``name`` of a process's folder in /proc as ``read`` finds it; what the kernel does
    not have (a namespace, a security module) reads alike for both processes compared."""
    try:
        return f"{name}: {read(f'{folder}/{name}')!r}"
    except OSError as error:
        return f"{name}: {error.errno}"


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as read:
        return read.read()


_SECURITY_LABELS = ("current", "apparmor/current", "selinux/current", "smack/current")
_CONFINING_STATUS = (
    "Uid:",
    "Gid:",
    "Groups:",
    "CapInh:",
    "CapPrm:",
    "CapEff:",
    "CapBnd:",
    "CapAmb:",
    "NoNewPrivs:",
    "Seccomp:",
    "Seccomp_filters:",  # a filter of the caller's own on top of those the two share
)
_NAMESPACES = ("mnt", "pid", "net", "user", "uts", "ipc", "cgroup", "time")


def _decode(body: bytes) -> Request:
    fields = [os.fsdecode(part) for part in body.split(b"\0")]
    if len(fields) < 10 or fields[0] != _handover.PROTOCOL:
        raise ValueError("not a request of this protocol")
    count = int(fields[9])
    arguments = fields[10 : 10 + count]
    if len(arguments) != count:
        raise ValueError("fewer arguments than announced")
    environment = dict(entry.split("=", 1) for entry in fields[10 + count :] if "=" in entry)
    ignored = tuple(int(number) for number in fields[5].split(",") if number)
    if not set(ignored) <= set(_handover.FORWARDED_SIGNALS):
        raise ValueError("ignored signals that are not forwarded ones")
    return Request(
        kind=fields[1],
        folder=fields[2],
        umask=int(fields[3]),
        interpreter=fields[4],
        ignored=ignored,
        streams=(fields[6], fields[7], fields[8]),
        arguments=arguments,
        environment=environment,
    )


def _run_command(connection: socket.socket, request: Request, descriptors: list[int]) -> NoReturn:
    """The fork's whole life: become the caller's command, run it, say its exit code.

    The caller's signals are held (see :data:`_FORK_SIGNALS`) until the fork's own handlers
    are in place. Whatever could keep it from running the command as the caller's own
    process would is settled before it says it started; then it waits for the caller's
    go-ahead, which a caller that gave up waiting never sends.
    """
    for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGWINCH):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for ignored in request.ignored:
        signal.signal(ignored, signal.SIG_IGN)
    try:
        connection.settimeout(_handover.FIRST_REPLY_SECONDS)
        unlike = _become_like_the_caller(connection, request)
        if unlike is not None:
            _handover.send_frame(connection, _handover.DECLINED, unlike)
            os._exit(0)
        _handover.send_frame(connection, _handover.STARTED, str(os.getpid()))
        if _handover.read_exactly(connection, len(_handover.PROCEED)) != _handover.PROCEED:
            os._exit(0)
        connection.settimeout(None)
    except OSError:  # the caller gave up waiting: it runs the command itself
        os._exit(0)
    code = 125
    ended = threading.Event()
    try:
        try:
            code = _command(connection, request, descriptors, ended)
        finally:
            with contextlib.suppress(BaseException):  # an exit hook's failure keeps the code
                _finish()
    except BaseException:  # a Ctrl-C during the exit's wait: the code stays
        pass
    # The command is over: a signal from here on has nothing to stop.
    signal.pthread_sigmask(signal.SIG_BLOCK, _FORK_SIGNALS)
    ended.set()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    code &= 0xFF  # as the kernel keeps it: sys.exit(-1) ends a process with 255
    with contextlib.suppress(OSError):
        _handover.send_frame(connection, _handover.ENDED, str(code))
    os._exit(code)


def _become_like_the_caller(connection: socket.socket, request: Request) -> str | None:
    """The caller's resource limits, priority, CPUs and folder for this fork; why the fork
    cannot run its command as the caller's process would, if so."""
    caller, _uid, _gid = _handover.peer_credentials(connection)
    try:
        for limit in _RESOURCE_LIMITS:
            theirs = resource.prlimit(caller, limit)
            if theirs != resource.getrlimit(limit):
                resource.setrlimit(limit, theirs)
        priority = os.getpriority(os.PRIO_PROCESS, caller)
        if priority != os.getpriority(os.PRIO_PROCESS, 0):
            os.setpriority(os.PRIO_PROCESS, 0, priority)
        processors = os.sched_getaffinity(caller)
        if processors != os.sched_getaffinity(0):
            os.sched_setaffinity(0, processors)
    except (OSError, ValueError) as error:
        return f"the caller's limits, priority or CPUs are beyond the warm process's: {error}"
    try:
        os.chdir(request.folder)
    except OSError as error:
        return f"cannot enter the caller's folder: {error}"
    return None


_RESOURCE_LIMITS = tuple(
    getattr(resource, name) for name in dir(resource) if name.startswith("RLIMIT_")
)


def _command(
    connection: socket.socket, request: Request, descriptors: list[int], ended: threading.Event
) -> int:
    """Take the caller's streams, umask and environment, and run its command: its code."""
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORK_SIGNALS)  # a Ctrl-C held meets it now
        for target, descriptor in enumerate(descriptors):
            os.dup2(descriptor, target)
            os.close(descriptor)
        descriptors.clear()
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

        return run_here(build_app())
    except SystemExit as exit_:
        return _exit_code(exit_)
    except KeyboardInterrupt:  # before the command's own handling was in place
        return 130
    except BaseException:  # the caller gets an exit code whatever happened
        with contextlib.suppress(Exception):
            import traceback

            traceback.print_exc()
        return 125


def _exit_code(exit_: SystemExit) -> int:
    """The status an interpreter ends with on this SystemExit (its message printed)."""
    if exit_.code is None:
        return 0
    if isinstance(exit_.code, int):
        return exit_.code
    with contextlib.suppress(Exception):
        print(exit_.code, file=sys.stderr)
    return 1


def _finish() -> None:
    """What an interpreter's exit does before it ends, as a fork of multiprocessing does it:
    wait for the threads (a container's removal), then run the exit hooks."""
    import atexit

    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()


def _text_stream(number: int, form: str) -> io.TextIOWrapper:
    encoding, errors, line_buffering, write_through, unbuffered = form.rsplit(":", 4)
    mode = "rb" if number == 0 else "wb"
    # Under -u or PYTHONUNBUFFERED the caller's output goes through no buffer.
    buffering = 0 if unbuffered == "1" else -1
    binary = open(number, mode, buffering, closefd=False)  # noqa: SIM115 (as long as the fork)
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
    if ended.is_set():
        return
    # A caller started as `command &` by a script ignores SIGINT, and so does its command:
    # SIGTERM then (the command line takes it as Ctrl-C), or an end without cleanup, as the
    # caller's own process had (the reaper removes its containers).
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        if signal.getsignal(number) is not signal.SIG_IGN:
            os.kill(os.getpid(), number)
            return


if __name__ == "__main__":
    main()
