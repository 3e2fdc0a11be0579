"""The supervisor inside every one-program sandbox container: it runs the program and vouches
for its end.

Run as ``main([workdir, uid, gid])`` (see :mod:`.._supervisor` on the host for
the whole protocol). It reads ``"<language> <size> <nonce> <limit ms> <watchdog>
<files size> <artifact bytes> <artifact count>\\n"``, the program and the input
files on stdin, acknowledges, and starts the program. A Python program's process
is forked as soon as the supervisor starts (in a pooled container, before the run comes):
it drops to the run uid (:func:`.privileges.drop_to`) and execs the interpreter, which
waits in its own start-up for the program (see :data:`.runners.PROGRAM_FD`); the input
files are unpacked as root with the run's gid, then the program is sent to it. Another
language's program is forked and exec'ed once it is in. The supervisor kills the program
at the run limit, ends every other process, has the artifacts
collected by a child that dropped to the run uid, and prints the status
trailer on stdout and stderr. It is also the watchdog: ``watchdog`` seconds
after the header it ends the container whatever happens, and it ends the run
at once when its stdin closes (the host is gone).
"""

import fcntl
import os
import select
import sys
import time

from .before_exec import move_descriptors, raise_oom_score
from .framing import (
    ACKNOWLEDGEMENT,
    artifacts_frame,
    say,
    status_trailer,
    trailer_mark,
    write_all,
)
from .privileges import drop_to, make_undumpable
from .runners import (
    PROGRAM_FD,
    RUNNERS,
    STARTUP_OUTPUT_FD,
    STDERR_FD,
    STDOUT_FD,
    WAITING_MARK,
    WITH_OUTPUT_FOLDER,
    LanguageRunner,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
else:
    # The C module behind signal: the same calls and numbers, without the enum machinery
    # (enum, functools, collections) that signal imports: ~10 ms of a new container's
    # start, paid before the program could start.
    import _signal as signal

# .files and .reaper are imported where they are used: the supervisor imports them while
# the program runs (compiling them costs a cold run a few milliseconds before its program
# could start otherwise); a program's child imports .files only for what it needs.

SUPERVISOR_FAILED_EXIT = 125
"""The container's status when the supervisor itself could not run the program."""

WAITING_LANGUAGE = "python"
"""The language whose interpreter a pooled container starts before its run comes."""

HEADER_LIMIT = 256
_LEFTOVERS_SECONDS = 5.0  # ending every other process
_WATCHDOG_EXIT = 137
_HOST_GONE_EXIT = 143  # nobody reads it: the process that ran the run has died


class Header:
    """The header line of a run, parsed."""

    __slots__ = (
        "artifact_bytes",
        "artifact_count",
        "files_size",
        "language",
        "limit_ms",
        "nonce",
        "size",
        "watchdog",
    )

    def __init__(self, line: bytes) -> None:
        fields = line.decode("ascii").split(" ")
        if len(fields) != 8:
            raise ValueError(f"a header has 8 fields (got {len(fields)})")
        self.language, size, self.nonce, *numbers = fields
        self.size = int(size)
        self.limit_ms, self.watchdog, self.files_size, self.artifact_bytes, self.artifact_count = (
            int(number) for number in numbers
        )
        if min(self.size, self.limit_ms, self.watchdog, self.files_size) < 0:
            raise ValueError("negative sizes or limits")


def fail(message: str) -> None:
    say(2, ("sandcrew: " + message + "\n").encode())
    os._exit(SUPERVISOR_FAILED_EXIT)


def header_waiting() -> bool:
    """Whether the run's header is already on stdin (a cold run's comes with the start)."""
    readable, _, _ = select.select([0], [], [], 0)
    return bool(readable)


def read_header() -> tuple[Header, bytes]:
    """The header from stdin and what followed it in the same reads."""
    data = b""
    while b"\n" not in data:
        if len(data) > HEADER_LIMIT:
            fail("unreadable header")
        chunk = os.read(0, 65536)
        if not chunk:
            os._exit(SUPERVISOR_FAILED_EXIT)
        data += chunk
    line, _, rest = data.partition(b"\n")
    try:
        return Header(line), rest
    except (ValueError, UnicodeDecodeError):
        fail("unreadable header")
        raise  # not reached: fail() exits


def read_exactly(size: int, start: bytes) -> bytes:
    chunks = [start]
    received = len(start)
    while received < size:
        chunk = os.read(0, min(size - received, 1 << 20))
        if not chunk:
            fail("the program ended early")
        chunks.append(chunk)
        received += len(chunk)
    return b"".join(chunks)


class WaitingProgram:
    """The program's process, started before its program: its interpreter waits on a pipe."""

    __slots__ = ("ended", "language", "pid", "pipe", "runner", "startup_output")

    def __init__(
        self, language: str, runner: LanguageRunner, pid: int, pipe: int, startup_output: int
    ) -> None:
        self.language, self.runner, self.pid = language, runner, pid
        self.pipe = pipe
        """The write end of the pipe the program is sent on."""
        self.startup_output = startup_output
        """The read end (non-blocking) of the pipe its stdout and stderr were until then."""
        self.ended = False
        """Whether it ended (and was reaped) before its program was sent."""

    def has_ended(self) -> bool:
        if not self.ended:
            reaped, _ = os.waitpid(self.pid, os.WNOHANG)
            self.ended = reaped == self.pid
        return self.ended

    def pass_on_startup_output(self) -> None:
        """What its start printed and it did not pass on itself (it ended before its program)."""
        while True:
            try:
                early = os.read(self.startup_output, 1 << 16)
            except BlockingIOError:
                return
            if not early:
                return
            say(2, early)

    def close_pipe(self) -> None:
        """The end of the program's message (or, without one, the interpreter's end)."""
        if self.pipe >= 0:
            os.close(self.pipe)
            self.pipe = -1

    def close(self) -> None:
        self.close_pipe()
        if self.startup_output >= 0:
            os.close(self.startup_output)
            self.startup_output = -1


class Supervisor:
    """One run: the program, its limits, its end."""

    def __init__(self, workdir: str, uid: int, gid: int) -> None:
        self.workdir, self.uid, self.gid = workdir, uid, gid
        self.watchdog_at = 0.0
        self.running = True
        self.timed_out = False

    def on_watchdog(self, number: int, frame: object) -> None:
        from .reaper import end_every_other_process

        end_every_other_process(2.0)
        os._exit(_WATCHDOG_EXIT)

    def arm_watchdog(self) -> None:
        signal.signal(signal.SIGALRM, self.on_watchdog)
        signal.setitimer(signal.ITIMER_REAL, max(self.watchdog_at - time.monotonic(), 0.001))

    def on_program_deadline(self, number: int, frame: object) -> None:
        # When the run limit is up, every process of the program is killed; what it
        # left in out/ is still collected and sent.
        if self.running:
            self.timed_out = True
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.arm_watchdog()

    def become_the_run_uid(self) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for number in (signal.SIGALRM, signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(number, signal.SIG_DFL)
        drop_to(self.uid, self.gid)
        os.chdir(self.workdir)

    def start_waiting_program(self, language: str) -> WaitingProgram | None:
        """Fork the program's process and start its interpreter now, before its program.

        In a pooled container that is before the run; in a cold one, while the supervisor
        reads the program and writes its input files. The interpreter then waits, in its
        own start-up, for the program on a pipe (see the runner's support file), so a run
        no longer waits for the interpreter's start. ``None`` if the fork failed (the run
        then starts its program the usual way).
        """
        runner = RUNNERS[language]
        program_read, program_write = os.pipe()
        startup_read, startup_write = os.pipe()
        try:
            # Room for what an image's start may print before anyone reads it (64 KiB else).
            fcntl.fcntl(startup_write, fcntl.F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass
        try:
            child = os.fork()
        except OSError:
            for descriptor in (program_read, program_write, startup_read, startup_write):
                os.close(descriptor)
            return None
        if child == 0:
            try:
                # First, so that whatever goes wrong from here on is told on the start-up
                # pipe, never on the container's streams before the acknowledgement.
                wait_on_pipe(program_read, startup_read, startup_write)
                raise_oom_score()
                self.become_the_run_uid()
                make_undumpable()  # until the exec: this copy of the supervisor may hold the nonce
                os.chmod(self.workdir, 0o770)  # as on every run: open to the run's gid
                self.write_support_files(runner)
                self.exec_interpreter(runner, waits=True)
            except BaseException as error:
                say(2, cannot_start(language, runner, error))
            os._exit(SUPERVISOR_FAILED_EXIT)
        os.close(program_read)
        os.close(startup_write)
        os.set_blocking(startup_read, False)
        return WaitingProgram(language, runner, child, program_write, startup_read)

    def hand_over(
        self, waiting: WaitingProgram, program: bytes, files: memoryview, with_output: bool
    ) -> None:
        """Write the input files (as root, with the run's gid), then send the program."""
        if self.timed_out:  # the run limit came first and killed it
            waiting.close_pipe()
            return
        try:
            if not files or self.unpack_input_files(waiting, files):
                write_all(waiting.pipe, WITH_OUTPUT_FOLDER if with_output else b"-")
                write_all(waiting.pipe, program)
        except OSError:
            pass  # it ended before it took its program: its status and start-up output say why
        finally:
            waiting.close_pipe()

    def unpack_input_files(self, waiting: WaitingProgram, files: memoryview) -> bool:
        """Whether the input files are in (if not, the reason is on stderr)."""
        try:
            helper = os.fork()
        except OSError as error:
            say(2, cannot_start(waiting.language, waiting.runner, error))
            return False
        if helper == 0:
            try:
                self.open_workdir_to_the_group()
                make_undumpable()  # a change of credentials resets it; this copy holds the nonce
                from .files import unpack_files

                unpack_files(files, self.workdir)
            except BaseException as error:
                say(2, cannot_start(waiting.language, waiting.runner, error))
                os._exit(SUPERVISOR_FAILED_EXIT)
            os._exit(0)
        _, status = os.waitpid(helper, 0)
        return status == 0

    @staticmethod
    def end_waiting_program(waiting: WaitingProgram) -> None:
        """The run is another language's, or the interpreter has ended: it goes, and the run
        starts its program the usual way (which tells why, if it fails again)."""
        waiting.close()
        if not waiting.ended:
            os.kill(waiting.pid, signal.SIGKILL)
            os.waitpid(waiting.pid, 0)

    def open_workdir_to_the_group(self) -> None:
        """Become root with the run's gid, able to write the input files into the work dir.

        The work dir is the run uid's: as that uid for a moment (effective only, root stays
        the real and saved uid), it is opened to its group, the run's gid. Then, as root with
        that gid, the input files are written: they are root's, so the program can read them
        but neither write them nor change their mode.
        """
        os.setegid(self.gid)
        os.seteuid(self.uid)
        os.chmod(self.workdir, 0o770)
        os.seteuid(0)

    @staticmethod
    def write_support_files(runner: LanguageRunner) -> None:
        for support_path, text in runner.support_files:
            os.makedirs(os.path.dirname(support_path), 0o700, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            try:
                handle = os.open(support_path, flags, 0o400)
            except FileExistsError:  # written by an interpreter that waited and ended
                os.unlink(support_path)
                handle = os.open(support_path, flags, 0o400)
            write_all(handle, text.encode())
            os.close(handle)

    def exec_interpreter(self, runner: LanguageRunner, *, waits: bool = False) -> None:
        environment = dict(os.environ)
        environment.update(runner.environment)
        if waits:
            environment[WAITING_MARK] = "1"
        path = os.path.join(self.workdir, runner.filename)
        os.execvpe(runner.interpreter[0], [*runner.interpreter, path], environment)

    def become_the_program(
        self, runner: LanguageRunner, program: bytes, files: memoryview, with_output: bool
    ) -> None:
        raise_oom_score()
        self.open_workdir_to_the_group()
        if files:
            from .files import unpack_files

            unpack_files(files, self.workdir)
        self.become_the_run_uid()
        make_undumpable()  # until the exec: this copy of the supervisor holds the nonce
        path = os.path.join(self.workdir, runner.filename)
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        write_all(handle, program)
        os.close(handle)
        self.write_support_files(runner)
        if with_output:
            from .files import OUTPUT_FOLDER

            os.mkdir(os.path.join(self.workdir, OUTPUT_FOLDER), 0o700)
        stdin_from_null()
        self.exec_interpreter(runner)

    def run(self) -> None:
        # No header yet: a pooled container, whose run comes later. The interpreter of the
        # language whose interpreter can wait (Python's) starts now, on the chance that the
        # run is in it; it is ended if the run is in another language.
        waiting = None
        if not header_waiting():
            waiting = self.start_waiting_program(WAITING_LANGUAGE)
        header, rest = read_header()
        runner = RUNNERS.get(header.language)
        if runner is None:
            fail("no interpreter for language " + repr(header.language))
            return
        if waiting is not None and (waiting.language != header.language or waiting.has_ended()):
            self.end_waiting_program(waiting)
            waiting = None
        elif waiting is None and runner.waits_for_program:
            waiting = self.start_waiting_program(header.language)
        self.watchdog_at = time.monotonic() + header.watchdog
        self.arm_watchdog()
        everything = read_exactly(header.size + header.files_size, rest)
        del rest
        program, files = everything[: header.size], memoryview(everything)[header.size :]
        with_output = header.artifact_count > 0
        say(1, ACKNOWLEDGEMENT)
        # The run limit counts from the acknowledgement.
        signal.signal(signal.SIGALRM, self.on_program_deadline)
        signal.setitimer(signal.ITIMER_REAL, header.limit_ms / 1000)
        if waiting is not None:
            child = waiting.pid
            self.hand_over(waiting, program, files, with_output)
        else:
            child = os.fork()
            if child == 0:
                try:
                    self.become_the_program(runner, program, files, with_output)
                except BaseException as error:
                    say(2, cannot_start(header.language, runner, error))
                os._exit(SUPERVISOR_FAILED_EXIT)
        if self.timed_out:  # the limit passed before the program existed
            os.kill(child, signal.SIGKILL)
        del program, files, everything
        # What the run's end needs, compiled and imported while the program starts rather
        # than before it or after it: the reaper and the artifact collector (which writes its
        # JSON itself: the json module would cost more than compiling both).
        from .files import collect_artifacts  # noqa: F401
        from .reaper import end_every_other_process

        status = self.wait_for(child)
        if waiting is not None:
            waiting.pass_on_startup_output()
            waiting.close()
        self.running = False
        self.arm_watchdog()
        code = os.waitstatus_to_exitcode(status)
        # Timed out only when the limit's kill ended the program, not when it ended just before.
        timed_out = self.timed_out and code == -signal.SIGKILL
        if code < 0:
            code = 128 - code
        end_every_other_process(_LEFTOVERS_SECONDS)
        # The program shared this process's stdout and stderr (the same open files): it may
        # have made them non-blocking, which would cut the artifacts frame and the trailer
        # short. No process of it is left to change them again.
        for stream in (1, 2):
            try:
                os.set_blocking(stream, True)
            except OSError:
                pass
        mark = trailer_mark(header.nonce)
        if header.artifact_count > 0:
            self.send_artifacts(mark, header)
        trailer = status_trailer(mark, code, timed_out=timed_out)
        say(1, trailer)
        say(2, trailer)
        os._exit(code)

    def wait_for(self, child: int) -> int:
        """The program's wait status; or, if the host goes first, the end of the run at once.

        The host keeps the container's stdin open until it has the result, so its
        end (the engine closes it when the process that ran the run dies) means
        nobody waits for the run any more: it does not go on to its limit.
        """
        woken, wake = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda number, frame: None)
        try:
            while True:
                ended, status = os.waitpid(child, os.WNOHANG)
                if ended == child:
                    return status
                # A SIGCHLD after the waitpid above leaves a byte in the pipe: not missed.
                readable, _, _ = select.select([0, woken], [], [])
                if woken in readable:
                    os.read(woken, 4096)
                if 0 in readable and not os.read(0, 1 << 16):
                    self.running = False
                    try:
                        os.kill(-1, signal.SIGKILL)  # as root: every process but this one
                    except ProcessLookupError:
                        pass
                    os._exit(_HOST_GONE_EXIT)
        finally:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.close(woken)
            os.close(wake)

    def send_artifacts(self, mark: bytes, header: Header) -> None:
        from .files import ARTIFACT_COLLECTION_SECONDS, collect_artifacts

        collector = os.fork()
        if collector == 0:
            try:
                self.become_the_run_uid()
                make_undumpable()  # it holds the nonce, as the program's uid
                give_up = time.monotonic() + ARTIFACT_COLLECTION_SECONDS
                listing = collect_artifacts(
                    self.workdir, header.artifact_bytes, header.artifact_count, give_up
                )
                write_all(1, artifacts_frame(mark, listing))
            except BaseException as error:
                say(2, ("sandcrew: cannot collect the output files: " + str(error) + "\n").encode())
            os._exit(0)
        os.waitpid(collector, 0)
        from .reaper import end_every_other_process

        end_every_other_process(_LEFTOVERS_SECONDS)


def stdin_from_null() -> None:
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


def wait_on_pipe(program_read: int, startup_read: int, startup_write: int) -> None:
    """The descriptors of an interpreter that waits for its program (see :mod:`.runners`).

    The program's pipe, the container's stdout and stderr and the start-up pipe's read
    end go to their fixed numbers; 1 and 2 become the start-up pipe; stdin is /dev/null.
    """
    move_descriptors(
        {
            PROGRAM_FD: program_read,
            STDOUT_FD: 1,
            STDERR_FD: 2,
            STARTUP_OUTPUT_FD: startup_read,
            1: startup_write,
            2: startup_write,
        }
    )
    stdin_from_null()


def cannot_start(language: str, runner: LanguageRunner, error: BaseException) -> bytes:
    """The stderr line of a program that could not start: most often an image without the
    language's interpreter (a JavaScript program given a Python image)."""
    interpreter = runner.interpreter[0]
    missing = getattr(error, "filename", None)
    if (
        isinstance(error, FileNotFoundError)
        and isinstance(missing, str | bytes)
        and os.path.basename(os.fsdecode(missing)) == interpreter
    ):
        return (
            f"sandcrew: cannot start the program: this image has no {language} interpreter "
            f"({interpreter} is not installed in it); run {language} programs in an image "
            "that has one\n"
        ).encode()
    return ("sandcrew: cannot start the program: " + str(error) + "\n").encode()


def main(arguments: list[str]) -> None:
    """``main([workdir, uid, gid, (proxy socket)])``: serve one run, then end the container.

    With the path of the host proxy's socket (a network-by-policy run), the relay to it
    listens on ``127.0.0.1:3128`` before the program exists.
    """
    make_undumpable()  # no ptrace, no /proc/<pid>/mem for anyone
    workdir, uid, gid = arguments[0], int(arguments[1]), int(arguments[2])
    if len(arguments) > 3:
        from .relay import start_relay

        try:
            start_relay(arguments[3], uid, gid)
        except OSError as error:
            fail("cannot start the network relay: " + str(error))
    Supervisor(workdir, uid, gid).run()
    sys.exit(SUPERVISOR_FAILED_EXIT)  # not reached: run() ends the process
