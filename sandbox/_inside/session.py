"""The session supervisor: one live interpreter in a hardened container, and the truth about it.

The container's command (``inside_command("session", SETTINGS, *DRIVER)``) runs
this module as root with only SETUID, SETGID, SETPCAP and KILL, not dumpable. It
forks the interpreter's driver (``DRIVER``, e.g. ``python3 -c <bootstrap of
session_python>``), which drops to the session's uid with an empty capability
set, with its stdout and stderr on pipes and the cell channel of
:mod:`.session_channel` on descriptors 3 and 4. The driver never holds the
container's stdout: only this supervisor writes there, in the frames of
:mod:`.session_protocol`, which carry the session's nonce (the first line on
stdin, kept only in this process's memory), so nothing the code in the
interpreter prints can pass for one of them. Requests arrive on stdin in the
same module's format; the end of stdin (the host closed the session or died)
ends everything.

What the supervisor decides on its own: a cell's time limit (SIGINT first, and
every other process the cell started is ended; if the interpreter has not
reported within the grace period, every process is killed and a fresh
interpreter started: ``state_lost``), the same after the host's interrupt, the
interpreter's death (out of memory or otherwise: ``state_lost``), a broken or
tampered channel (the same, see :mod:`.session_integrity`), the idle timeout
and the lifetime. Output relayed per cell is capped (the rest is read and
dropped), so the host's memory is bounded whatever the code prints. Files are
read and written by a helper process that drops to the session's uid and never
follows a link; commands run beside the interpreter (:mod:`.session_commands`).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from .before_exec import move_descriptors, raise_oom_score
from .framing import write_all
from .privileges import drop_to, make_undumpable
from .reaper import end_every_other_process, remove_own_ipc_objects
from .session_channel import (
    COMMANDS_FD,
    DISPLAY,
    DROPPED_DISPLAY,
    MESSAGES_FD,
    READY,
    RESULT,
    ChannelError,
    MessageReader,
    clean_count,
    clean_display,
    clean_result,
    encode_command,
)
from .session_commands import Commands, processes_of_sessions
from .session_files import file_request
from .session_integrity import holders_seen_as, tampering
from .session_protocol import (
    COMMAND,
    DISPLAY as DISPLAY_FRAME,
    END,
    ERR,
    EXPIRED,
    FAILED,
    FILE,
    FILE_ANSWER,
    INTERRUPT,
    LOST,
    OUT,
    READY as READY_FRAME,
    RESTART,
    RUN,
    SIGNAL,
    ProtocolError,
    Request,
    RequestReader,
    cell_verdict,
    encode_frame,
    file_answer,
)

_NONCE_LINE_LIMIT = 256
_REINTERRUPT_SECONDS = 0.5
_STARTUP_ERRORS = 2048
_CHUNK = 64 * 1024
_MAX_FD = 65536
_IPC_CLEANUP_SECONDS = 5.0
# The container's OOM-kill counter: cgroup v2, then v1.
_OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")


@dataclass
class Settings:
    workdir: str
    uid: int
    gid: int
    language: str
    idle_seconds: float
    lifetime_seconds: float
    grace_seconds: float
    start_seconds: float
    output_bytes: int
    display_bytes: int
    file_bytes: int
    code_bytes: int
    environment: dict[str, str]
    proxy_socket: str | None = None
    """The host proxy's socket in the container (network by policy): the relay forwards to it."""


@dataclass
class Interpreter:
    pid: int
    out: int
    err: int
    commands: int
    messages: int
    reader: MessageReader
    started: float
    oom_kills: int
    channel: frozenset[tuple[int, int]]
    """The ``(descriptor, inode)`` of the channel's two sockets in the interpreter."""
    ready: bool = False
    cells: int = 0
    """Cells given to this interpreter."""
    outgoing: bytearray = field(default_factory=bytearray)
    keep: set[int] = field(default_factory=set)
    """Processes of the interpreter itself (a driver's shell), spared when a cell is ended."""


@dataclass
class Cell:
    seq: int
    limit: float
    code: str
    options: dict[str, Any] = field(default_factory=dict)
    """What the driver is told besides the code (the context, and which to start afresh)."""
    dispatched: bool = False
    deadline: float | None = None
    grace_deadline: float | None = None
    next_interrupt: float | None = None
    timed_out: bool = False


@dataclass
class Helper:
    ident: str
    fd: int
    limit: int
    data: bytearray = field(default_factory=bytearray)
    too_large: bool = False


class Supervisor:
    def __init__(self, settings: Settings, driver: list[str]) -> None:
        self.settings = settings
        self.driver = driver
        self.nonce: bytes | None = None
        self.held: list[tuple[str, bytes]] = []
        self.selector = selectors.DefaultSelector()
        self.started = time.monotonic()
        self.last_activity = self.started
        self.interpreter: Interpreter | None = None
        self.cell: Cell | None = None
        self.lost_reason: str | None = None
        self.helpers: dict[int, Helper] = {}
        self.helper_processes: set[int] = set()
        """File helpers not reaped yet (a helper may still be ending after its answer came)."""
        self.requests = RequestReader(max(settings.file_bytes, settings.code_bytes))
        self.nonce_line = bytearray()
        self.startup_errors = b""
        self.relayed = {"out": 0, "err": 0, "display": 0}
        self.truncated = {"out": False, "err": False, "display": False}
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_read, False)
        os.set_blocking(wake_write, False)
        self.wake = wake_read
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda number, frame: None)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        self.selector.register(wake_read, selectors.EVENT_READ, "wake")
        self.selector.register(0, selectors.EVENT_READ, "requests")
        self.relay_listener: socket.socket | None = None
        self.relay_pid: int | None = None
        if settings.proxy_socket is not None:
            from .relay import relay_listener

            self.relay_listener = relay_listener()
        self.commands = Commands(
            self.selector,
            self.emit,
            uid=settings.uid,
            gid=settings.gid,
            workdir=settings.workdir,
            environment=settings.environment,
            output_bytes=settings.output_bytes,
        )

    # -- frames to the host ------------------------------------------------------------

    def emit(self, kind: str, payload: bytes) -> None:
        if self.nonce is None:
            self.held.append((kind, payload))
            return
        write_all(1, encode_frame(self.nonce, kind, payload))

    def emit_json(self, kind: str, payload: dict[str, Any]) -> None:
        self.emit(kind, json.dumps(payload).encode())

    def relay(self, stream: str, data: bytes) -> None:
        """Pass on output within the cap of the current cell; read and drop the rest."""
        if stream == "err" and self.interpreter is not None and not self.interpreter.ready:
            self.startup_errors = (self.startup_errors + data)[-_STARTUP_ERRORS:]
        limit = self.settings.display_bytes if stream == "display" else self.settings.output_bytes
        room = limit - self.relayed[stream]
        if len(data) > room:
            self.truncated[stream] = True
            if stream == "display":
                return  # a display output is whole or not at all
            data = data[: max(room, 0)]
        if data:
            self.relayed[stream] += len(data)
            self.emit({"out": OUT, "err": ERR, "display": DISPLAY_FRAME}[stream], data)

    # -- the interpreter -------------------------------------------------------------

    def spawn(self) -> None:
        settings = self.settings
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        # Socket pairs, not pipes: no other process can open them through /proc.
        commands_write, commands_read = _socket_pair()
        messages_read, messages_write = _socket_pair()
        channel = frozenset(
            {
                (COMMANDS_FD, os.fstat(commands_read).st_ino),
                (MESSAGES_FD, os.fstat(messages_write).st_ino),
            }
        )
        oom_kills = _oom_kills()
        pid = os.fork()
        if pid == 0:
            try:
                self._become_interpreter(
                    {
                        1: out_write,
                        2: err_write,
                        COMMANDS_FD: commands_read,
                        MESSAGES_FD: messages_write,
                    }
                )
            except BaseException as error:
                message = f"sandcrew: cannot start the interpreter: {error}\n".encode()
                with contextlib.suppress(OSError):
                    write_all(err_write, message)
            os._exit(126)
        for descriptor in (out_write, err_write, commands_read, messages_write):
            os.close(descriptor)
        for descriptor in (out_read, err_read, commands_write, messages_read):
            os.set_blocking(descriptor, False)
        self.interpreter = Interpreter(
            pid=pid,
            out=out_read,
            err=err_read,
            commands=commands_write,
            messages=messages_read,
            reader=MessageReader(settings.display_bytes + _CHUNK),
            started=time.monotonic(),
            oom_kills=oom_kills,
            channel=channel,
        )
        self.selector.register(out_read, selectors.EVENT_READ, "out")
        self.selector.register(err_read, selectors.EVENT_READ, "err")
        self.selector.register(messages_read, selectors.EVENT_READ, "messages")

    def _become_interpreter(self, targets: dict[int, int]) -> None:
        signal.set_wakeup_fd(-1)
        for number in (signal.SIGCHLD, signal.SIGPIPE, signal.SIGINT, signal.SIGXFSZ):
            signal.signal(number, signal.SIG_DFL)
        raise_oom_score()
        null = os.open("/dev/null", os.O_RDWR)
        move_descriptors({0: null, **targets})
        os.closerange(5, _MAX_FD)
        drop_to(self.settings.uid, self.settings.gid)
        os.chdir(self.settings.workdir)
        os.umask(0o022)
        os.execvpe(self.driver[0], self.driver, self.settings.environment)

    def close_interpreter(self) -> None:
        interpreter = self.interpreter
        if interpreter is None:
            return
        self.interpreter = None
        for descriptor in (
            interpreter.out,
            interpreter.err,
            interpreter.commands,
            interpreter.messages,
        ):
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(descriptor)
            os.close(descriptor)

    def drain(self) -> None:
        """Relay what the interpreter's pipes hold right now (its output before its report)."""
        interpreter = self.interpreter
        if interpreter is None:
            return
        for stream, descriptor in (("out", interpreter.out), ("err", interpreter.err)):
            for _ in range(64):
                try:
                    data = os.read(descriptor, _CHUNK)
                except (BlockingIOError, OSError):
                    break
                if not data:
                    break
                self.relay(stream, data)

    def kill_everything(self) -> None:
        """SIGKILL every process but the init and this one, until none is left."""
        end_every_other_process(5.0)
        self.reap_quietly()
        self.relay_pid = None
        for pid in list(self.helpers):
            self.finish_helper(pid, {"error": "the session's interpreter was restarted"})
        self.commands.forget("every process of the session was ended (the interpreter restarted)")

    def reap_quietly(self) -> None:
        try:
            while (pid := os.waitpid(-1, os.WNOHANG)[0]) > 0:
                self.helper_processes.discard(pid)
        except ChildProcessError:
            pass

    def own_processes(self) -> set[int]:
        """The supervisor's own helpers of the session's uid that a cell's end spares."""
        return set() if self.relay_pid is None else {self.relay_pid}

    def kill_cell_processes(self) -> None:
        """End every process but the interpreter (and the file helpers): what a cell started."""
        keep = {1, os.getpid(), *self.helper_processes, *self.own_processes()}
        if self.interpreter is not None:
            keep.add(self.interpreter.pid)
            keep.update(self.interpreter.keep)
        if self.commands:
            keep.update(processes_of_sessions(self.commands.sessions()))
        give_up = time.monotonic() + 1.0
        while time.monotonic() < give_up:
            found = False
            for name in os.listdir("/proc"):
                if name.isdigit() and int(name) not in keep:
                    found = True
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(name), signal.SIGKILL)
            if not found:
                return
            time.sleep(0.002)

    def restart(self, reason: str) -> None:
        """Kill every process, start a fresh interpreter; a running cell loses its state."""
        self.drain()
        self.close_interpreter()
        self.kill_everything()
        self.remove_ipc_objects()
        self.start_relay()
        if self.cell is not None:
            self.end_cell(
                count=None,
                error={"name": "InterpreterLost", "value": reason, "traceback": ""},
                state_lost=True,
                reason=reason,
            )
        self.spawn()

    def replace_interpreter(self, reason: str) -> None:
        """Between cells: a fresh interpreter; the waiting cell runs there and says why."""
        self.lost_reason = reason
        self.emit_json(LOST, {"reason": reason})
        cell, self.cell = self.cell, None
        self.restart(reason)
        self.cell = cell

    def remove_ipc_objects(self) -> None:
        """The session's SysV IPC objects outlive its processes: remove them, as its uid."""
        try:
            pid = os.fork()
        except OSError:
            return
        if pid == 0:
            status = 1
            try:
                signal.set_wakeup_fd(-1)
                drop_to(self.settings.uid, self.settings.gid)
                status = 0 if remove_own_ipc_objects(self.settings.uid) else 1
            finally:
                os._exit(status)
        give_up = time.monotonic() + _IPC_CLEANUP_SECONDS
        while time.monotonic() < give_up:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return
            except ChildProcessError:
                return
            time.sleep(0.002)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    def interpreter_died(self, status: int) -> None:
        interpreter = self.interpreter
        assert interpreter is not None
        self.drain()
        reason = _death_reason(status, _oom_kills() > interpreter.oom_kills)
        if not interpreter.ready:
            said = self.startup_errors.decode("utf-8", "replace").strip()
            self.emit_json(FAILED, {"reason": f"{reason}: {said}" if said else reason})
            raise SystemExit(1)
        if self.cell is None:
            self.lost_reason = reason
            self.emit_json(LOST, {"reason": reason})
        self.restart(reason)

    # -- cells ------------------------------------------------------------------------

    def begin_cell(self, seq: int, limit: float, code: str, options: dict[str, Any]) -> None:
        if self.cell is not None:
            # The host runs one cell at a time; a second one is refused, never queued.
            self.emit(
                END,
                cell_verdict(
                    seq,
                    count=None,
                    error={"name": "Refused", "value": "another cell is running", "traceback": ""},
                    timed_out=False,
                    state_lost=False,
                    reason=None,
                    truncated={},
                ),
            )
            return
        self.relayed = dict.fromkeys(self.relayed, 0)
        self.truncated = dict.fromkeys(self.truncated, False)
        self.cell = Cell(seq=seq, limit=limit, code=code, options=options)
        self.dispatch()

    def dispatch(self) -> None:
        cell, interpreter = self.cell, self.interpreter
        if cell is None or cell.dispatched or interpreter is None or not interpreter.ready:
            return
        problem = self.channel_problem(interpreter)
        if problem is not None:
            if interpreter.cells == 0:
                # Nothing of the session's code has run in it: the check itself cannot work here.
                self.emit_json(FAILED, {"reason": f"cannot vouch for the interpreter: {problem}"})
                raise SystemExit(1)
            self.replace_interpreter(
                f"{problem}: the interpreter was ended and a fresh one started"
            )
            return  # the cell goes to the fresh interpreter once it is ready
        cell.dispatched = True
        interpreter.cells += 1
        cell.deadline = time.monotonic() + cell.limit
        interpreter.outgoing += encode_command(
            {
                "seq": cell.seq,
                "code": cell.code,
                "display_limit": self.settings.display_bytes,
                **cell.options,
            }
        )
        cell.code = ""
        self.selector.register(interpreter.commands, selectors.EVENT_WRITE, "commands")

    def channel_problem(self, interpreter: Interpreter) -> str | None:
        """Why the interpreter's channel cannot be trusted for the next cell, if it cannot."""
        expected = {(interpreter.pid, fd, inode) for fd, inode in interpreter.channel}
        spared = {1, os.getpid(), *self.helper_processes, *self.own_processes()}
        try:
            found = holders_seen_as(
                self.settings.uid,
                self.settings.gid,
                frozenset(inode for _, inode in interpreter.channel),
                spared,
                set(processes_of_sessions(self.commands.sessions())) if self.commands else set(),
            )
        except PermissionError as error:
            return f"the session's processes cannot be checked ({error})"
        return tampering(expected, found)

    def end_cell(
        self,
        *,
        count: Any,
        error: Any,
        state_lost: bool = False,
        reason: str | None = None,
    ) -> None:
        cell = self.cell
        assert cell is not None
        self.drain()
        if self.lost_reason is not None:  # died since the last cell: this one starts afresh
            state_lost = True
            reason = reason or self.lost_reason
            self.lost_reason = None
        self.cell = None
        self.last_activity = time.monotonic()
        self.emit(
            END,
            cell_verdict(
                cell.seq,
                count=count,
                error=error,
                timed_out=cell.timed_out,
                state_lost=state_lost,
                reason=reason,
                truncated=self.truncated,
            ),
        )

    def on_message(self, kind: bytes, payload: dict[str, Any]) -> None:
        interpreter = self.interpreter
        assert interpreter is not None
        if kind == READY and not interpreter.ready:
            interpreter.ready = True
            self.last_activity = time.monotonic()  # idle from now, not from the start
            keep = payload.get("keep")
            if isinstance(keep, list):
                interpreter.keep = {pid for pid in keep[:8] if isinstance(pid, int) and pid > 1}
            self.emit_json(READY_FRAME, {"count": clean_count(payload.get("count"))})
            self.dispatch()
        elif kind == DISPLAY:
            output = clean_display(payload)
            if payload.get("dropped") is not None:
                self.truncated["display"] = True
            elif output is not None:
                self.relay("display", json.dumps(output).encode())
        elif kind == DROPPED_DISPLAY:
            self.truncated["display"] = True
        elif kind == RESULT:
            cell = self.cell
            if cell is not None and cell.dispatched and payload.get("seq") == cell.seq:
                self.end_cell(**clean_result(payload))

    def check_cell_clock(self, now: float) -> None:
        cell = self.cell
        if cell is None:
            interpreter = self.interpreter
            if (
                interpreter is not None
                and not interpreter.ready
                and now - interpreter.started > self.settings.start_seconds
            ):
                self.emit_json(FAILED, {"reason": "the interpreter did not start in time"})
                raise SystemExit(1)
            return
        if not cell.dispatched:
            interpreter = self.interpreter
            if interpreter is not None and now - interpreter.started > self.settings.start_seconds:
                self.restart("the interpreter did not start in time")
            return
        if cell.grace_deadline is not None and now >= cell.grace_deadline:
            grace = self.settings.grace_seconds
            self.restart(
                f"the cell did not stop within {grace:g} s of its interrupt: "
                "the interpreter was killed and a fresh one started"
            )
        elif cell.deadline is not None and cell.grace_deadline is None and now >= cell.deadline:
            cell.timed_out = True
            cell.grace_deadline = now + self.settings.grace_seconds
            self.interrupt_timed_out_cell(cell, now)
        elif cell.next_interrupt is not None and now >= cell.next_interrupt:
            self.interrupt_timed_out_cell(cell, now)

    def interrupt_cell(self) -> None:
        """The host's interrupt: SIGINT now; past the grace, the interpreter is killed."""
        cell, interpreter = self.cell, self.interpreter
        if cell is None or not cell.dispatched or interpreter is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(interpreter.pid, signal.SIGINT)
        if cell.grace_deadline is None:
            cell.grace_deadline = time.monotonic() + self.settings.grace_seconds

    def interrupt_timed_out_cell(self, cell: Cell, now: float) -> None:
        """SIGINT the interpreter and end every other process, again until the cell reports.

        Again, because Python drops a ``KeyboardInterrupt`` raised while it runs
        its at-fork callbacks (where code that forks in a loop spends its time),
        and a process may have forked while the others were being killed.
        """
        cell.next_interrupt = now + _REINTERRUPT_SECONDS
        if self.interpreter is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.interpreter.pid, signal.SIGINT)
        self.kill_cell_processes()

    # -- requests from the host ---------------------------------------------------------

    def on_requests(self) -> None:
        try:
            data = os.read(0, _CHUNK)
        except OSError:
            data = b""
        if not data:
            self.finish(None)
        if self.nonce is None:
            self.nonce_line += data
            newline = self.nonce_line.find(b"\n")
            if newline < 0:
                if len(self.nonce_line) > _NONCE_LINE_LIMIT:
                    raise SystemExit(2)
                return
            self.nonce = bytes(self.nonce_line[:newline])
            data = bytes(self.nonce_line[newline + 1 :])
            del self.nonce_line[:]
            for kind, payload in self.held:
                write_all(1, encode_frame(self.nonce, kind, payload))
            self.held = []
        try:
            requests = self.requests.feed(data)
        except ProtocolError as error:
            # Only the host writes here: a broken stream is a bug, and it ends the session.
            self.emit_json(FAILED, {"reason": f"the host broke the session's protocol ({error})"})
            raise SystemExit(2) from None
        for request in requests:
            self.last_activity = time.monotonic()
            self.on_request(request)

    def on_request(self, request: Request) -> None:
        meta = request.meta
        if request.kind == RUN:
            limit_ms = meta.get("limit_ms")
            limit = limit_ms / 1000 if isinstance(limit_ms, int) and limit_ms > 0 else 30.0
            options: dict[str, Any] = {
                key: meta[key] for key in ("context", "fresh", "drop") if key in meta
            }
            code = request.data.decode("utf-8", "surrogateescape")
            seq = int(request.ident) if request.ident.isdigit() else 0
            self.begin_cell(seq, limit, code, options)
        elif request.kind == INTERRUPT:
            self.interrupt_cell()
        elif request.kind == RESTART:
            self.lost_reason = None
            self.restart("the session was restarted")
        elif request.kind == FILE:
            self.start_helper(request.ident, meta, request.data)
        elif request.kind == COMMAND:
            self.commands.start(request.ident, meta)
        elif request.kind == SIGNAL:
            self.commands.signal(request.ident, meta.get("signal"))

    # -- files ------------------------------------------------------------------------

    def start_helper(self, ident: str, meta: dict[str, Any], data: bytes) -> None:
        max_bytes = meta.get("max_bytes")
        limit = max_bytes if isinstance(max_bytes, int) and max_bytes >= 0 else 0
        read_end, write_end = os.pipe()
        try:
            pid = os.fork()
        except OSError as error:
            os.close(read_end)
            os.close(write_end)
            self.emit_file(ident, {"error": f"cannot start the file helper: {error.strerror}"}, b"")
            return
        if pid == 0:
            answer = b""
            try:
                signal.set_wakeup_fd(-1)
                null = os.open("/dev/null", os.O_RDWR)
                for target in (0, 1, 2):
                    os.dup2(null, target)
                os.closerange(3, write_end)
                os.closerange(write_end + 1, _MAX_FD)
                drop_to(self.settings.uid, self.settings.gid)
                make_undumpable()
                answer = file_request(self.settings.workdir, meta, data, self.settings.file_bytes)
            except BaseException as error:
                refusal = {"error": str(error), "missing": isinstance(error, FileNotFoundError)}
                answer = json.dumps(refusal).encode() + b"\n"
            with contextlib.suppress(OSError):
                write_all(write_end, answer)
            os._exit(0)
        os.close(write_end)
        os.set_blocking(read_end, False)
        self.helper_processes.add(pid)
        self.helpers[pid] = Helper(ident=ident, fd=read_end, limit=max(limit, 0) + _CHUNK * 16)
        self.selector.register(read_end, selectors.EVENT_READ, ("helper", pid))

    def on_helper(self, pid: int) -> None:
        helper = self.helpers.get(pid)
        if helper is None:
            return
        try:
            data = os.read(helper.fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            if len(helper.data) + len(data) > helper.limit:
                helper.too_large = True
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                self.finish_helper(pid, {"error": "the answer is larger than allowed"})
            else:
                helper.data += data
            return
        head, _, body = bytes(helper.data).partition(b"\n")
        try:
            answer = json.loads(head)
        except (ValueError, RecursionError):
            answer = {"error": "the file helper ended without an answer"}
        if not isinstance(answer, dict):
            answer = {"error": "the file helper ended without an answer"}
        self.finish_helper(pid, answer, body)

    def finish_helper(self, pid: int, answer: dict[str, Any], body: bytes = b"") -> None:
        helper = self.helpers.pop(pid, None)
        if helper is None:
            return
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(helper.fd)
        os.close(helper.fd)
        self.emit_file(helper.ident, answer, body)

    def emit_file(self, ident: str, answer: dict[str, Any], body: bytes) -> None:
        self.emit(FILE_ANSWER, file_answer(ident, answer, body))

    # -- the loop ---------------------------------------------------------------------

    def finish(self, reason: str | None) -> None:
        """End every process and the container; tell the host why, if it is still there."""
        if reason is not None:
            self.emit_json(EXPIRED, {"reason": reason})
        self.close_interpreter()
        self.kill_everything()
        raise SystemExit(0)

    def timeout(self, now: float) -> float:
        moments = [
            self.started + self.settings.lifetime_seconds,
            now + 0.5,  # the start-up check
        ]
        command_deadline = self.commands.next_deadline()
        if command_deadline is not None:
            moments.append(command_deadline)
        if self.cell is None:
            moments.append(self.last_activity + self.settings.idle_seconds)
        else:
            cell = self.cell
            for moment in (cell.deadline, cell.grace_deadline, cell.next_interrupt):
                if moment is not None:
                    moments.append(moment)
        return max(0.0, min(moments) - now)

    def start_relay(self) -> None:
        """The network relay of a network-by-policy session, as the session's uid."""
        if self.relay_listener is None or self.settings.proxy_socket is None:
            return
        from .relay import fork_relay

        self.relay_pid = fork_relay(
            self.relay_listener, self.settings.proxy_socket, self.settings.uid, self.settings.gid
        )

    def serve(self) -> None:
        self.start_relay()
        self.spawn()
        while True:
            now = time.monotonic()
            for key, _ in self.selector.select(self.timeout(now)):
                self.on_ready(key.data, key.fd)
            self.reap()
            now = time.monotonic()
            if now - self.started >= self.settings.lifetime_seconds:
                self.finish("the session reached its maximum lifetime")
            if (
                self.cell is None
                and self.interpreter is not None
                and self.interpreter.ready
                and now - self.last_activity >= self.settings.idle_seconds
                and not self.helpers
                and not self.commands
            ):
                self.finish("the session was idle for too long")
            self.check_cell_clock(now)
            self.commands.check_deadlines(now)

    def on_ready(self, what: Any, descriptor: int) -> None:
        interpreter = self.interpreter
        if what == "wake":
            try:
                while os.read(self.wake, 512):
                    pass
            except BlockingIOError:
                pass
        elif what == "requests":
            self.on_requests()
        elif isinstance(what, tuple) and what[0] == "command":
            self.commands.on_output(what[1], what[2])
        elif isinstance(what, tuple):
            self.on_helper(what[1])
        elif interpreter is None:
            return
        elif what in ("out", "err"):
            try:
                data = os.read(descriptor, _CHUNK)
            except BlockingIOError:
                return
            if data:
                self.relay(what, data)
            else:
                self.selector.unregister(descriptor)
        elif what == "messages":
            self.on_messages(interpreter)
        elif what == "commands":
            self.on_commands(interpreter)

    def on_messages(self, interpreter: Interpreter) -> None:
        try:
            data = os.read(interpreter.messages, _CHUNK)
        except BlockingIOError:
            return
        if not data:
            status = _wait_briefly(interpreter.pid)
            if status is not None:
                self.interpreter_died(status)
            else:
                self.restart("the interpreter closed its channel to the supervisor")
            return
        try:
            messages = interpreter.reader.feed(data)
        except ChannelError as error:
            self.restart(f"the interpreter broke its channel to the supervisor ({error})")
            return
        for kind, payload in messages:
            if self.interpreter is not interpreter:
                return
            self.on_message(kind, payload)

    def on_commands(self, interpreter: Interpreter) -> None:
        try:
            written = os.write(interpreter.commands, interpreter.outgoing)
        except BlockingIOError:
            return
        except OSError:
            self.selector.unregister(interpreter.commands)
            self.restart("the interpreter closed its channel to the supervisor")
            return
        del interpreter.outgoing[:written]
        if not interpreter.outgoing:
            self.selector.unregister(interpreter.commands)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.helper_processes.discard(pid)
            if pid == self.relay_pid:  # a cell may end it (same uid): its network comes back
                self.start_relay()
                continue
            if self.commands.on_exit(pid, status):
                continue
            if self.interpreter is not None and pid == self.interpreter.pid:
                self.interpreter_died(status)
            elif pid in self.helpers:
                helper = self.helpers[pid]
                self.on_helper_exit(pid, helper)

    def on_helper_exit(self, pid: int, helper: Helper) -> None:
        # Read what is left; the pipe's end comes through the selector otherwise.
        while pid in self.helpers:
            before = len(helper.data)
            self.on_helper(pid)
            if pid in self.helpers and len(helper.data) == before:
                return


def _socket_pair() -> tuple[int, int]:
    first, second = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return first.detach(), second.detach()


def _wait_briefly(pid: int) -> int | None:
    """The status of ``pid`` if it ends within a moment (its channel closed as it died)."""
    for _ in range(50):
        try:
            ended, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if ended == pid:
            return status
        time.sleep(0.004)
    return None


def _oom_kills() -> int:
    for path in _OOM_COUNTERS:
        try:
            with open(path, encoding="ascii") as handle:
                for line in handle:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return 0


def _death_reason(status: int, out_of_memory: bool) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if out_of_memory and number == signal.SIGKILL:
            return "the interpreter ran out of memory and was killed; a fresh one started"
        name = signal.Signals(number).name if number in signal.Signals.__members__.values() else ""
        return f"the interpreter was killed by signal {number} {name}".rstrip() + (
            "; a fresh one started"
        )
    return f"the interpreter exited with status {os.WEXITSTATUS(status)}; a fresh one started"


def main(arguments: list[str]) -> None:
    make_undumpable()
    raw = json.loads(arguments[0])
    settings = Settings(**raw)
    supervisor = Supervisor(settings, arguments[1:])
    try:
        supervisor.serve()
    except SystemExit:
        raise
    except BaseException as error:
        try:
            supervisor.emit_json(FAILED, {"reason": f"the session supervisor failed: {error!r}"})
        finally:
            supervisor.close_interpreter()
            supervisor.kill_everything()
        sys.exit(3)
