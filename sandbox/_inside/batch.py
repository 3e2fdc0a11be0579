"""The batch supervisor: one hardened container runs many programs, each isolated from the rest.

Run as ``main([workdir, first_uid, uid_count, nproc, address_space, slots, cleanup_ms])``.
It starts like the one-program supervisor (root with only SETUID, SETGID,
SETPCAP and KILL, not dumpable), reads the nonce as the first line of stdin,
then serves requests until stdin closes: ``"<id> <language> <size> <limit_ms>
<output_limit>\\n"`` followed by ``size`` bytes of program. Each task runs as:

- **its own uid**, one per task and never reused in the container, with no
  capability: it cannot signal, trace or read the supervisor or another task;
- **its own empty directory** ``<workdir>/<random>`` (mode 0700, made by the
  task after its drop; the workdir is root's, mode 1733: tasks may create in
  it but not list it), ``HOME`` and ``TMPDIR`` pointing there; ``/tmp``,
  ``/dev/shm`` and ``/dev/mqueue`` are made unwritable before the first task;
- **its own limits**: wall time, ``RLIMIT_AS``, ``RLIMIT_NPROC`` (per uid, so
  per task) and the output kept.

Nothing of a task survives it: when its main process ends or its time is up,
the zygote (which never held a nonce, a program or the supervisor's stdout)
kills the task's main process, its child, even before that dropped to the
uid, then forks a reaper that first kills every process of the task's uid (as
that uid, ``kill(-1)`` until none runs), then, as root, lists what the uid left
in the workdir, drops to the uid for good and removes the task's SysV IPC
objects and those entries, without recursion and within a time bound, and
waits until PID 1 has reaped the task's killed processes (a zombie holds its
place under the container's process limit). The supervisor's loop never waits
for it; the task's slot is free once it is done, and no task starts while a
reaper works.
When the cleanup fails, or it leaves less than one slot's part of the workdir
free (space an ended task held is still held), the container retires: queued
and later tasks come back as ``elsewhere``.

Results travel on the supervisor's stdout, which no task can write (a task's
stdout and stderr are pipes the supervisor reads), one frame per task (see
:func:`.framing.batch_frame`). A task that could not start, or that was killed
outside its deadline (by the kernel, for the container's shared memory), comes
back as ``alone``: its status says nothing of the program. A task timed out
when its main process ended past its limit, as the zygote saw it end.
"""

import importlib
import io
import os
import resource
import runpy
import secrets
import selectors
import signal
import socket
import sys
import time
import traceback

from .before_exec import raise_oom_score
from .framing import (
    OUTCOME_ALONE,
    OUTCOME_ELSEWHERE,
    OUTCOME_RESULT,
    batch_frame,
    write_all,
)
from .privileges import drop_to, make_undumpable
from .reaper import (
    end_own_processes,
    owned_entries,
    remove_entry,
    remove_own_ipc_objects,
    wait_until_reaped,
)
from .runners import RUNNERS

SHARED_FOLDERS = ("/tmp", "/dev/shm", "/dev/mqueue")
"""Writable by every uid in a container; made root's only before the first task."""
KILL_SECONDS = 5.0
"""Seconds a reaper tries at most to end every process of a task."""
CLEANUP_SECONDS = 5.0
"""Seconds a reaper deletes a task's files at most by default; past it the container retires."""
START_FAILED_EXIT = 125
_KILLED_EXIT = 128 + signal.SIGKILL
_MESSAGE_SIZE = 256
_READS_PER_EVENT = 4
_STATUS_FD = 3  # a task's start-up errors, in the task: closed once the program runs


class Request:
    """A request line: ``"<id> <language> <size> <limit_ms> <output_limit>"``."""

    __slots__ = ("identifier", "language", "limit", "output_limit", "size")

    def __init__(self, line: bytes) -> None:
        fields = line.decode("ascii").split(" ")
        if len(fields) != 5:
            raise ValueError(f"a request has 5 fields (got {len(fields)})")
        self.identifier, self.language = fields[0], fields[1]
        self.size, limit_ms, self.output_limit = (int(field) for field in fields[2:])
        if not self.identifier.isalnum() or min(self.size, limit_ms, self.output_limit) < 0:
            raise ValueError("bad request " + repr(line))
        self.limit = limit_ms / 1000


def task_outcome(
    code: int, ended_at: float, ends_at: float, *, start_failed: bool
) -> tuple[str, int, bool]:
    """(outcome, status, timed out) of a task whose main process ended with ``code``.

    Judged by when it ended (as the zygote saw it), never by when the
    supervisor got to it. A SIGKILL before its deadline came from the kernel
    (the container's memory is shared), so it says nothing of the program.
    """
    if start_failed:
        return OUTCOME_ALONE, code, False
    if ended_at >= ends_at:
        return OUTCOME_RESULT, _KILLED_EXIT, True
    if code == _KILLED_EXIT:
        return OUTCOME_ALONE, code, False
    return OUTCOME_RESULT, code, False


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def _drain(descriptor: int, chunks_at_most: int = 1 << 30) -> tuple[bytes, bool]:
    """What a non-blocking pipe holds now (up to a number of reads: a writer that never
    stops must not hold the loop), and whether it reached its end."""
    chunks: list[bytes] = []
    for _ in range(chunks_at_most):
        try:
            chunk = os.read(descriptor, 65536)
        except BlockingIOError:
            break
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)
    return b"".join(chunks), False


# The zygote: forked before the supervisor read anything, it never holds a nonce, a
# program or the supervisor's stdout. It forks the tasks and their reapers.


def become_the_task(workdir: str, uid: int, language: str, nproc: int, address_space: int) -> None:
    """In a fresh fork of the zygote: fds 0-3 are set; become the task's program."""
    program = _read_program(0)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.closerange(_STATUS_FD + 1, 65536)
    for number in (signal.SIGPIPE, signal.SIGCHLD, signal.SIGXFSZ):
        signal.signal(number, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    raise_oom_score()
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    drop_to(uid, uid)
    directory = os.path.join(workdir, secrets.token_hex(16))
    os.mkdir(directory, 0o700)
    os.chdir(directory)
    runner = RUNNERS[language]
    path = os.path.join(directory, runner.filename)
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    write_all(handle, program)
    os.close(handle)
    os.environ.update(runner.environment)
    os.environ.update(HOME=directory, TMPDIR=directory)
    if language != "python":
        os.set_inheritable(_STATUS_FD, False)  # closed by the exec: it started
        os.execvpe(runner.interpreter[0], [*runner.interpreter, path], dict(os.environ))
    os.close(_STATUS_FD)
    os._exit(_run_python(directory, path))


def _above_status_fd(descriptor: int) -> int:
    while descriptor <= _STATUS_FD:
        descriptor = os.dup(descriptor)
    return descriptor


def _read_program(descriptor: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(descriptor, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _run_python(directory: str, path: str) -> int:
    """Python runs in this already started interpreter, as ``python3 main.py`` would
    (site-packages, sys.path, __main__), without paying for a new interpreter."""
    # A new interpreter ignores these two: a write past the file size limit or to a
    # closed pipe is an OSError the program sees, not the end of it.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    sys.dont_write_bytecode = True
    sys.argv = [path]
    sys.path.insert(0, directory)
    for number, name in ((1, "stdout"), (2, "stderr")):
        stream = io.TextIOWrapper(
            io.FileIO(number, "w", closefd=False),
            encoding="utf-8",
            errors="backslashreplace",
            write_through=True,
        )
        setattr(sys, name, stream)
        setattr(sys, "__" + name + "__", stream)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    setattr(sys, "__stdin__", sys.stdin)  # noqa: B010 - final for type checkers, not here
    code = 0
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as ending:
        if ending.code is None:
            code = 0
        elif isinstance(ending.code, int):
            code = ending.code & 0xFF
        else:
            print(ending.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    return code


def reap(workdir: str, uid: int, cleanup_seconds: float = CLEANUP_SECONDS) -> int:
    """In a fresh fork of the zygote: end the task of ``uid``, then remove what it left.

    0 when nothing of it is left; 1 when something could not be ended or deleted within
    ``KILL_SECONDS`` and ``cleanup_seconds``.
    """
    os.closerange(3, 65536)
    give_up = time.monotonic() + KILL_SECONDS
    # Killing as the task's uid: a process of it may kill the killer first; then again.
    while True:
        killer = os.fork()
        if killer == 0:
            drop_to(uid, uid)
            make_undumpable()
            os._exit(0 if end_own_processes(uid, max(give_up - time.monotonic(), 0.0)) else 1)
        status = os.waitpid(killer, 0)[1]
        if os.WIFEXITED(status):
            if os.WEXITSTATUS(status) != 0:
                return 1
            break
        if time.monotonic() > give_up:
            return 1
    # No process of the uid is left and none can start: what it left stays as it is.
    names = owned_entries(workdir, uid)
    drop_to(uid, uid)
    make_undumpable()
    clean = remove_own_ipc_objects(uid)
    deadline = time.monotonic() + cleanup_seconds
    for name in names:
        try:
            remove_entry(workdir, name, deadline)
        except (OSError, TimeoutError):
            clean = False
    # Killed processes hold their pids until PID 1 reaps them (late when a neighbour
    # takes the CPU): the next task starts with the whole process limit given back.
    clean = wait_until_reaped(uid, max(deadline, give_up)) and clean
    return 0 if clean else 1


class Zygote:
    """Forks tasks and reapers on the supervisor's requests and reports their ends."""

    def __init__(
        self,
        channel: socket.socket,
        workdir: str,
        nproc: int,
        address_space: int,
        cleanup_seconds: float,
    ):
        self.channel, self.workdir = channel, workdir
        self.nproc, self.address_space = nproc, address_space
        self.cleanup_seconds = cleanup_seconds
        self.tasks: dict[int, int] = {}  # pid: uid
        self.reapers: dict[int, int] = {}

    def serve(self) -> None:
        # What every Python task needs, imported once here rather than in each task
        # (runpy imports pkgutil on its first use: about 8 ms a task otherwise), and the
        # site directories every Python task gets (about 9 ms a task otherwise).
        importlib.import_module("pkgutil")
        importlib.import_module("site").main()
        null = os.open("/dev/null", os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)  # the supervisor's stdout: no child of the zygote gets it
        os.close(null)
        woken_read, woken_write = os.pipe()
        os.set_blocking(woken_write, False)
        signal.signal(signal.SIGCHLD, lambda number, frame: None)
        signal.set_wakeup_fd(woken_write)
        waiting = selectors.DefaultSelector()
        waiting.register(self.channel, selectors.EVENT_READ)
        waiting.register(woken_read, selectors.EVENT_READ)
        while True:
            for key, _ in waiting.select():
                if key.fd == woken_read:
                    try:
                        os.read(woken_read, 4096)
                    except BlockingIOError:
                        pass
                else:
                    self.take_request()
            self.report_ends()

    def take_request(self) -> None:
        message, descriptors, _, _ = socket.recv_fds(self.channel, _MESSAGE_SIZE, 4)
        if not message:
            os._exit(0)
        words = message.decode().split(" ")
        uid = int(words[1])
        if words[0] == "start":
            self.start(uid, words[2], descriptors)
        elif words[0] == "reap":
            self.start_reaper(uid)

    def start(self, uid: int, language: str, descriptors: list[int]) -> None:
        try:
            child = os.fork()
        except OSError:
            self.channel.send(f"unstarted {uid}".encode())
            child = -1
        if child == 0:
            try:
                # Out of the way of fds 0-3 first, so no dup2 below overwrites one of them.
                descriptors = [_above_status_fd(descriptor) for descriptor in descriptors]
                for target, descriptor in enumerate(descriptors):
                    os.dup2(descriptor, target)
                become_the_task(self.workdir, uid, language, self.nproc, self.address_space)
            except BaseException as error:
                why = "sandcrew: cannot start the program: " + str(error) + "\n"
                try:
                    os.write(_STATUS_FD, why.encode())
                except OSError:
                    pass
            os._exit(START_FAILED_EXIT)
        for descriptor in descriptors:
            os.close(descriptor)
        if child > 0:
            self.tasks[child] = uid
            self.channel.send(f"started {uid} {time.monotonic()!r}".encode())

    def start_reaper(self, uid: int) -> None:
        # The task's main process may not have dropped to its uid yet (a reap asked for
        # right after the start, as when the host goes away): the reaper's kill as that uid
        # would miss it, and it would run on. It is this process's child: killed here first.
        for pid, owner in self.tasks.items():
            if owner == uid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        try:
            reaper = os.fork()
        except OSError:
            self.channel.send(f"reaped {uid} 1".encode())
            return
        if reaper == 0:
            code = 1
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                code = reap(self.workdir, uid, self.cleanup_seconds)
            finally:
                os._exit(code)
        self.reapers[reaper] = uid

    def report_ends(self) -> None:
        while True:
            try:
                ended, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if ended == 0:
                return
            at = time.monotonic()
            if ended in self.tasks:
                uid = self.tasks.pop(ended)
                self.channel.send(f"exit {uid} {_exit_code(status)} {at!r}".encode())
            elif ended in self.reapers:
                uid = self.reapers.pop(ended)
                self.channel.send(f"reaped {uid} {int(status != 0)}".encode())


class Task:
    """A task from its request to its reaper's end."""

    def __init__(self, request: Request, program: bytes, uid: int) -> None:
        self.request, self.program, self.uid = request, program, uid
        self.out = self.err = self.status = -1
        self.output: dict[int, bytearray] = {}
        self.cut: dict[int, bool] = {}
        self.open_streams: set[int] = set()
        self.ends_at = float("inf")
        self.code: int | None = None
        self.ended_at = 0.0
        self.start_error = b""
        self.reaping = False
        self.reaped = False
        self.answered = False

    def keep(self, descriptor: int, chunk: bytes) -> None:
        buffer = self.output[descriptor]
        room = self.request.output_limit - len(buffer)
        if room > 0:
            buffer += chunk[:room]
        if len(chunk) > room:
            self.cut[descriptor] = True


def free_bytes(folder: str) -> int:
    """Bytes of ``folder``'s file system that an unprivileged task can still write."""
    found = os.statvfs(folder)
    return found.f_bavail * found.f_frsize


def slot_share(folder: str, slots: int) -> int:
    """One slot's part of the work folder (the container's is ``slots`` times one task's)."""
    found = os.statvfs(folder)
    return found.f_blocks * found.f_frsize // slots


class BatchSupervisor:
    def __init__(
        self, channel: socket.socket, workdir: str, first_uid: int, uid_count: int, slots: int
    ) -> None:
        self.channel, self.workdir = channel, workdir
        self.first_uid, self.uid_count, self.slots = first_uid, uid_count, slots
        # Tasks that keep within their own part always leave one part free when a task
        # has been cleaned up; less means something of an ended task still holds space.
        self.share = slot_share(workdir, slots)
        self.selector = selectors.DefaultSelector()
        self.selector.register(0, selectors.EVENT_READ, "host")
        self.selector.register(channel, selectors.EVENT_READ, "zygote")
        self.nonce = b""
        self.nonce_read = False
        self.incoming = b""
        self.tasks: dict[int, Task] = {}  # by uid, until their reaper ended
        self.queued: list[Task] = []
        self.next_uid = 0
        self.host_open = True
        self.retired: str | None = None

    def serve(self) -> None:
        while self.host_open or self.tasks:
            now = time.monotonic()
            deadlines = [task.ends_at - now for task in self.tasks.values() if not task.reaping]
            for key, _ in self.selector.select(max(0.0, min([*deadlines, 1.0]))):
                if key.data == "host":
                    self.from_host()
                elif key.data == "zygote":
                    self.from_zygote()
                else:
                    self.from_task(key.data, key.fd)
            now = time.monotonic()
            for task in list(self.tasks.values()):
                if now >= task.ends_at and not task.reaping:
                    self.end(task)  # the zygote then reports its main process's end

    def from_host(self) -> None:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            self.host_open = False
            self.selector.unregister(0)
            self.queued.clear()
            for task in self.tasks.values():
                if task.out >= 0:
                    self.end(task)
            return
        self.incoming += chunk
        self.take_requests()
        self.launch_queued()

    def take_requests(self) -> None:
        while b"\n" in self.incoming:
            line, _, rest = self.incoming.partition(b"\n")
            if not self.nonce_read:
                self.nonce, self.incoming, self.nonce_read = line.strip(), rest, True
                continue
            request = Request(line)
            if len(rest) < request.size:
                return
            program, self.incoming = rest[: request.size], rest[request.size :]
            if request.language not in RUNNERS:
                refusal = b"sandcrew: no interpreter for this language here\n"
                frame = batch_frame(
                    self.nonce, request.identifier, status=START_FAILED_EXIT, err=refusal
                )
                write_all(1, frame)
            elif self.retired is not None or self.next_uid >= self.uid_count:
                write_all(1, batch_frame(self.nonce, request.identifier, outcome=OUTCOME_ELSEWHERE))
            else:
                self.queued.append(Task(request, program, self.first_uid + self.next_uid))
                self.next_uid += 1

    def launch_queued(self) -> None:
        # At most `slots` tasks run or are being cleaned up at once; the host keeps a
        # few more queued here so that no slot waits for a round trip to the host. None
        # starts while a reaper works: a task starts with no other task's leftovers (and
        # the space and memory they held back), and sees no process of an ended task.
        if any(task.reaping and not task.reaped for task in self.tasks.values()):
            return
        while self.queued and len(self.tasks) < self.slots:
            self.launch(self.queued.pop(0))

    def launch(self, task: Task) -> None:
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        status_read, status_write = os.pipe()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        request = f"start {task.uid} {task.request.language}".encode()
        descriptors = [theirs.fileno(), out_write, err_write, status_write]
        socket.send_fds(self.channel, [request], descriptors)
        theirs.close()
        for descriptor in (out_write, err_write, status_write):
            os.close(descriptor)
        try:
            ours.sendall(task.program)
        except OSError:
            pass  # the zygote could not fork, or the task died before it read: reported apart
        ours.close()
        task.program = b""
        task.out, task.err, task.status = out_read, err_read, status_read
        for descriptor in (out_read, err_read):
            task.output[descriptor] = bytearray()
            task.cut[descriptor] = False
            task.open_streams.add(descriptor)
            os.set_blocking(descriptor, False)
            self.selector.register(descriptor, selectors.EVENT_READ, task)
        os.set_blocking(status_read, False)
        self.tasks[task.uid] = task

    def from_task(self, task: Task, descriptor: int) -> None:
        if descriptor not in task.open_streams:
            return  # closed earlier in this round; the number may be reused
        chunk, ended = _drain(descriptor, _READS_PER_EVENT)
        task.keep(descriptor, chunk)
        if ended:
            self.close_stream(task, descriptor)
            self.maybe_answer(task)

    def close_stream(self, task: Task, descriptor: int) -> None:
        task.open_streams.discard(descriptor)
        self.selector.unregister(descriptor)
        os.close(descriptor)

    def from_zygote(self) -> None:
        message = self.channel.recv(_MESSAGE_SIZE)
        if not message:
            os._exit(START_FAILED_EXIT)
        words = message.decode().split(" ")
        task = self.tasks.get(int(words[1]))
        if task is None:
            return
        if words[0] == "started":
            task.ends_at = float(words[2]) + task.request.limit
        elif words[0] == "unstarted":
            task.start_error = b"sandcrew: the container could not start the program\n"
            task.code, task.ended_at = START_FAILED_EXIT, time.monotonic()
            os.close(task.status)
            self.end(task)
            self.maybe_answer(task)
        elif words[0] == "exit":
            task.code, task.ended_at = int(words[2]), float(words[3])
            error, _ = _drain(task.status)
            task.start_error = error
            os.close(task.status)
            self.end(task)
            self.maybe_answer(task)
        elif words[0] == "reaped":
            task.reaped = True
            if words[2] != "0":
                self.retire("a task's processes or files could not be removed")
            elif free_bytes(self.workdir) < self.share:
                # A neighbour may hold an ended task's files open (passed to it, or opened
                # through a folder the task opened to all): space the next task must have.
                self.retire("the space of an ended task did not come back")
            self.maybe_answer(task)
            self.forget_if_done(task)

    def end(self, task: Task) -> None:
        if not task.reaping:
            task.reaping = True
            self.channel.send(f"reap {task.uid}".encode())

    def maybe_answer(self, task: Task) -> None:
        """Answer once the main process ended and every writer of its output is gone."""
        if task.answered or task.code is None or (task.open_streams and not task.reaped):
            return
        for descriptor in list(task.open_streams):
            chunk, _ = _drain(descriptor)
            task.keep(descriptor, chunk)
            self.close_stream(task, descriptor)
        task.answered = True
        self.forget_if_done(task)
        if not self.host_open:
            return
        outcome, status, timed_out = task_outcome(
            task.code, task.ended_at, task.ends_at, start_failed=bool(task.start_error)
        )
        err = bytes(task.output[task.err])
        frame = batch_frame(
            self.nonce,
            task.request.identifier,
            outcome=outcome,
            status=status,
            timed_out=timed_out,
            out=bytes(task.output[task.out]),
            err=task.start_error or err,
            out_cut=task.cut[task.out],
            err_cut=task.cut[task.err],
        )
        write_all(1, frame)

    def forget_if_done(self, task: Task) -> None:
        """A task holds its slot until it is answered and its reaper ended."""
        if task.answered and task.reaped and self.tasks.get(task.uid) is task:
            del self.tasks[task.uid]
            self.launch_queued()

    def retire(self, why: str) -> None:
        """Take no task any more: the queued ones and any later one go elsewhere."""
        if self.retired is None:
            self.retired = why
            sys.stderr.write("sandcrew: the batch container retires: " + why + "\n")
        for task in self.queued:
            frame = batch_frame(self.nonce, task.request.identifier, outcome=OUTCOME_ELSEWHERE)
            write_all(1, frame)
        self.queued.clear()


def main(arguments: list[str]) -> None:
    """``main([workdir, first_uid, uid_count, nproc, address_space, slots, cleanup_ms])``."""
    make_undumpable()
    workdir = arguments[0]
    first_uid, uid_count, nproc, address_space, slots, cleanup_ms = (
        int(value) for value in arguments[1:7]
    )
    os.chmod(workdir, 0o1733)
    for shared in SHARED_FOLDERS:
        try:
            os.chmod(shared, 0o755)
        except FileNotFoundError:
            continue  # not there: nothing to share
        except OSError:
            pass  # read-only, say: what counts is that no task can write in it
        if os.stat(shared).st_mode & 0o022 and not os.statvfs(shared).f_flag & os.ST_RDONLY:
            sys.stderr.write("sandcrew: cannot make " + shared + " unwritable for tasks\n")
            os._exit(START_FAILED_EXIT)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    channel, zygote_channel = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if os.fork() == 0:
        channel.close()
        try:
            Zygote(zygote_channel, workdir, nproc, address_space, cleanup_ms / 1000).serve()
        finally:
            os._exit(0)
    zygote_channel.close()
    BatchSupervisor(channel, workdir, first_uid, uid_count, slots).serve()
