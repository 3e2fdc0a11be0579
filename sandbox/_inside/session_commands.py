"""Commands beside a session's interpreter: shell commands as the session's user, same files.

The supervisor forks each command in a session of its own (``setsid``: its
processes, whatever they do, keep that session id, so the supervisor can tell
them from a cell's and spare them when a cell is ended), drops it to the
session's uid and runs ``/bin/bash -l -c COMMAND`` in the work folder (or a
folder below it), with the session's environment and the variables asked for.
Its stdout and stderr are pipes the supervisor relays as they come, capped per
command; it ends when its main process exits (its exit code, or the signal that
killed it), at its time limit (SIGKILL to its whole session: ``timed_out``), or
when the host sends it a signal.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .before_exec import move_descriptors, raise_oom_score
from .privileges import drop_to
from .session_protocol import COMMAND_END, COMMAND_OUTPUT, command_output

_CHUNK = 64 * 1024
_MAX_FD = 65536
_SHELL = "/bin/bash"
_MAX_COMMANDS = 64


@dataclass
class Command:
    ident: str
    pid: int
    pipes: dict[str, int]
    """``out`` and ``err``: the read ends of its stdout and stderr."""
    deadline: float | None
    relayed: dict[str, int] = field(default_factory=lambda: {"out": 0, "err": 0})
    truncated: dict[str, bool] = field(default_factory=lambda: {"out": False, "err": False})
    timed_out: bool = False


class Commands:
    """The commands of one session, as its supervisor runs them."""

    def __init__(
        self,
        selector: selectors.BaseSelector,
        emit: Callable[[str, bytes], None],
        *,
        uid: int,
        gid: int,
        workdir: str,
        environment: dict[str, str],
        output_bytes: int,
    ) -> None:
        self._selector = selector
        self._emit = emit
        self._uid = uid
        self._gid = gid
        self._workdir = workdir
        self._environment = environment
        self._output_bytes = output_bytes
        self.running: dict[int, Command] = {}

    def __bool__(self) -> bool:
        return bool(self.running)

    def start(self, ident: str, meta: dict[str, Any]) -> None:
        """Start the command ``meta`` describes; a refusal is told as its end."""
        command = meta.get("command")
        environment = meta.get("env") or {}
        folder = meta.get("cwd") or self._workdir
        limit_ms = meta.get("limit_ms")
        problem = None
        if not isinstance(command, str) or not command.strip():
            problem = "a command is needed"
        elif not isinstance(environment, dict) or not all(
            isinstance(name, str) and isinstance(value, str) and name and "=" not in name
            for name, value in environment.items()
        ):
            problem = "the environment must map names to strings"
        elif not isinstance(folder, str) or not _inside(folder, self._workdir):
            problem = f"the working folder must be inside {self._workdir}"
        elif len(self.running) >= _MAX_COMMANDS:
            problem = f"{_MAX_COMMANDS} commands are running already"
        if problem is not None:
            self._end(ident, {"error": problem})
            return
        assert isinstance(command, str)
        assert isinstance(folder, str)
        pipes = {"out": os.pipe(), "err": os.pipe()}
        try:
            pid = os.fork()
        except OSError as error:
            for read_end, write_end in pipes.values():
                os.close(read_end)
                os.close(write_end)
            self._end(ident, {"error": f"cannot start the command: {error.strerror}"})
            return
        if pid == 0:
            self._become_command(command, folder, environment, pipes["out"][1], pipes["err"][1])
        for read_end, write_end in pipes.values():
            os.close(write_end)
            os.set_blocking(read_end, False)
        deadline = None
        if isinstance(limit_ms, int) and limit_ms > 0:
            deadline = time.monotonic() + limit_ms / 1000
        started = Command(ident, pid, {name: ends[0] for name, ends in pipes.items()}, deadline)
        self.running[pid] = started
        for stream, descriptor in started.pipes.items():
            self._selector.register(descriptor, selectors.EVENT_READ, ("command", pid, stream))

    def _become_command(
        self, command: str, folder: str, environment: dict[str, Any], out: int, err: int
    ) -> None:
        try:
            signal.set_wakeup_fd(-1)
            for number in (signal.SIGCHLD, signal.SIGPIPE, signal.SIGINT, signal.SIGXFSZ):
                signal.signal(number, signal.SIG_DFL)
            os.setsid()
            raise_oom_score()
            null = os.open("/dev/null", os.O_RDWR)
            move_descriptors({0: null, 1: out, 2: err})
            os.closerange(3, _MAX_FD)
            drop_to(self._uid, self._gid)
            os.chdir(folder)
            os.umask(0o022)
            variables = {**self._environment, **environment}
            os.execve(_SHELL, [_SHELL, "-l", "-c", command], variables)
        except BaseException as error:
            with contextlib.suppress(OSError):
                os.write(2, f"sandcrew: cannot start the command: {error}\n".encode())
        os._exit(127)

    def on_output(self, pid: int, stream: str) -> None:
        command = self.running.get(pid)
        if command is None:
            return
        descriptor = command.pipes.get(stream)
        if descriptor is None:
            return
        try:
            data = os.read(descriptor, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close_pipe(command, stream)
            return
        self._relay(command, stream, data)

    def _relay(self, command: Command, stream: str, data: bytes) -> None:
        room = self._output_bytes - command.relayed[stream]
        if len(data) > room:
            command.truncated[stream] = True
            data = data[: max(room, 0)]
        if data:
            command.relayed[stream] += len(data)
            self._emit(COMMAND_OUTPUT, command_output(command.ident, stream, data))

    def _close_pipe(self, command: Command, stream: str) -> None:
        descriptor = command.pipes.pop(stream, None)
        if descriptor is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(descriptor)
            os.close(descriptor)

    def on_exit(self, pid: int, status: int) -> bool:
        """Whether ``pid`` was a command's main process (its end is told)."""
        command = self.running.pop(pid, None)
        if command is None:
            return False
        for stream in list(command.pipes):
            # What it wrote before it ended; processes it left may hold the pipe: not waited for.
            for _ in range(64):
                try:
                    data = os.read(command.pipes[stream], _CHUNK)
                except OSError:
                    break
                if not data:
                    break
                self._relay(command, stream, data)
            self._close_pipe(command, stream)
        ending: dict[str, Any] = {}
        if os.WIFSIGNALED(status):
            ending["signal"] = os.WTERMSIG(status)
            ending["exit_code"] = 128 + os.WTERMSIG(status)
        else:
            ending["exit_code"] = os.WEXITSTATUS(status)
        ending["timed_out"] = command.timed_out
        ending["stdout_truncated"] = command.truncated["out"]
        ending["stderr_truncated"] = command.truncated["err"]
        self._end(command.ident, ending)
        return True

    def _end(self, ident: str, ending: dict[str, Any]) -> None:
        self._emit(COMMAND_END, json.dumps({"id": ident, **ending}).encode())

    def signal(self, ident: str, number: Any) -> None:
        """Send ``number`` to every process of the command ``ident`` (its session)."""
        if not isinstance(number, int) or number not in signal.valid_signals():
            return
        for command in self.running.values():
            if command.ident == ident:
                self._signal_session(command.pid, number)

    def check_deadlines(self, now: float) -> None:
        for command in self.running.values():
            if command.deadline is not None and now >= command.deadline:
                command.timed_out = True
                command.deadline = None
                self._signal_session(command.pid, signal.SIGKILL)

    def next_deadline(self) -> float | None:
        deadlines = [c.deadline for c in self.running.values() if c.deadline is not None]
        return min(deadlines) if deadlines else None

    def sessions(self) -> set[int]:
        """The session ids of the running commands (a command's processes keep its session)."""
        return set(self.running)

    def _signal_session(self, session: int, number: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(session, number)
        for pid in processes_of_sessions({session}):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, number)

    def forget(self, reason: str) -> None:
        """Every process is gone (the interpreter was replaced): tell each command's end."""
        for pid in list(self.running):
            command = self.running.pop(pid)
            for stream in list(command.pipes):
                self._close_pipe(command, stream)
            self._end(command.ident, {"exit_code": 137, "signal": 9, "error": reason})


def processes_of_sessions(sessions: set[int]) -> list[int]:
    """The processes whose session id is one of ``sessions``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if len(fields) > 3 and int(fields[3]) in sessions:
            found.append(int(name))
    return found


def _inside(folder: str, workdir: str) -> bool:
    parts = folder.split("/")
    return (
        folder.startswith("/")
        and (folder == workdir or folder.startswith(workdir.rstrip("/") + "/"))
        and ".." not in parts
    )
