"""The supervisor inside every sandbox container: it runs the program and vouches for its end.

Every sandbox container starts as root with only the SETUID, SETGID, SETPCAP and
KILL capabilities (and no-new-privileges) and runs this small Python
supervisor, passed on the command line so the image needs nothing of ours. It
waits on stdin for ``"<language> <size> <nonce> <watchdog>\\n"`` followed by
exactly ``size`` bytes of program, prints one acknowledgement byte on stdout,
and forks a child that raises its own OOM score (so the kernel's OOM killer
takes the program, not the supervisor), empties its capability bounding set,
drops to the container's run uid (``setgroups([])``, ``setresgid``,
``setresuid``), writes the program into the work dir (a tmpfs owned by that
uid) and execs the language's interpreter with stdin on ``/dev/null``.

Why the exit status cannot be forged: the nonce arrives on stdin, never in argv
or the environment, and lives only in the supervisor's memory (the child's copy
is gone with its ``exec``). The supervisor runs as root, a uid other than the
program's, and is not dumpable, so the program can neither ptrace it (our
seccomp profile also refuses ptrace), read its ``/proc/<pid>/mem`` or
``environ``, nor signal it. When the child has ended, the supervisor SIGKILLs
every other process of the container until none is left (so nothing the
program left behind can print after it), then prints the trailer
``"\\x1e<nonce>:<status>\\n"`` on stdout and on stderr and exits with the
program's status. Each stream is in order, so once both trailers are in, all
the program's output is; the stream reader strips them. A program can print
any bytes, but not the nonce.

The supervisor is also the watchdog: ``watchdog`` seconds after its header (the
time limit plus :data:`~._deadlines.WATCHDOG_GRACE`, so the host's kill normally
comes first), it kills every process and ends the container, so a crashed or
hung host leaves it running for seconds, not until a reaper comes. The program
cannot kill it (another uid).

The acknowledgement tells a container that died before it read its program
(nothing ran, so the run may go to another container) from a program that ran
and failed. The language travels in the header, so one started container can
serve any language its image holds; that is what lets a pool start containers
before it knows what they will run.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from ._deadlines import watchdog_seconds
from ._languages import RUNNERS

ACKNOWLEDGEMENT = b"."
"""Printed on stdout by the supervisor once it has the program, before the program runs."""

SUPERVISOR_FAILED_EXIT = 125
"""The container's status when the supervisor itself could not run the program."""

SUPERVISOR_CAPABILITIES = ("SETUID", "SETGID", "SETPCAP", "KILL")
"""What the supervisor needs: drop to the run uid, empty the bounding set, end leftovers."""

_TRAILER_START = b"\x1e"  # ASCII record separator
_HEADER_LIMIT = 256


def _runner_table() -> dict[str, tuple[str, tuple[str, ...], dict[str, str]]]:
    return {
        language: (runner.filename, runner.interpreter, dict(runner.environment))
        for language, runner in RUNNERS.items()
    }


# Run as `python3 -I -S -c SUPERVISOR <workdir> <uid> <gid>` (isolated, no site:
# nothing from the image's environment or site-packages runs as root).
SUPERVISOR = f"""
import ctypes, os, signal, sys, time
RUNNERS = {_runner_table()!r}
FAILED = {SUPERVISOR_FAILED_EXIT}
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no ptrace, no /proc/<pid>/mem for anyone
workdir, uid, gid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def say(fd, data):
    try:
        while data:
            data = data[os.write(fd, data):]
    except OSError:
        pass

def fail(message):
    say(2, ("sandcrew: " + message + "\\n").encode())
    os._exit(FAILED)

def end_every_other_process(within):
    # kill(-1) reaches every process but PID 1 and this one; ESRCH: none is left.
    give_up = time.monotonic() + within
    while time.monotonic() < give_up:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.002)

def on_watchdog(number, frame):
    end_every_other_process(2.0)
    os._exit(137)

data = b""
while b"\\n" not in data:
    if len(data) > {_HEADER_LIMIT}:
        fail("unreadable header")
    chunk = os.read(0, 65536)
    if not chunk:
        os._exit(FAILED)
    data += chunk
line, _, data = data.partition(b"\\n")
try:
    language, size, nonce, watchdog = line.decode().split(" ")
    size, watchdog = int(size), int(watchdog)
except ValueError:
    fail("unreadable header")
runner = RUNNERS.get(language)
if runner is None:
    fail("no interpreter for language " + repr(language))
signal.signal(signal.SIGALRM, on_watchdog)
signal.setitimer(signal.ITIMER_REAL, watchdog)
chunks = [data]
received = len(data)
while received < size:
    chunk = os.read(0, size - received)
    if not chunk:
        fail("the program ended early")
    chunks.append(chunk)
    received += len(chunk)
program = b"".join(chunks)
del chunks, data
filename, interpreter, variables = runner
say(1, {ACKNOWLEDGEMENT!r})

def become_the_program():
    signal.setitimer(signal.ITIMER_REAL, 0)
    for number in (signal.SIGALRM, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(number, signal.SIG_DFL)
    with open("/proc/self/oom_score_adj", "w") as handle:
        handle.write("1000")
    capability = 0
    while libc.prctl(24, capability, 0, 0, 0) == 0:  # PR_CAPBSET_DROP, until EINVAL
        capability += 1
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # capability version 3, this process
    if libc.capset(header, (ctypes.c_uint32 * 6)()) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    os.chdir(workdir)
    path = os.path.join(workdir, filename)
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    say(handle, program)
    os.close(handle)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    environment = dict(os.environ)
    environment.update(variables)
    os.execvpe(interpreter[0], [*interpreter, path], environment)

child = os.fork()
if child == 0:
    try:
        become_the_program()
    except BaseException as error:
        say(2, ("sandcrew: cannot start the program: " + str(error) + "\\n").encode())
    os._exit(FAILED)
del program
os.close(0)
while True:
    ended, status = os.waitpid(child, 0)
    if ended == child:
        break
code = os.waitstatus_to_exitcode(status)
if code < 0:
    code = 128 - code
end_every_other_process(5.0)
trailer = {_TRAILER_START!r} + nonce.encode() + b":" + str(code).encode() + b"\\n"
say(1, trailer)
say(2, trailer)
os._exit(code)
"""


def supervisor_command(workdir: str, uid: int, gid: int) -> list[str]:
    """The container command: the supervisor, with the work dir and the run's uid and gid."""
    return ["python3", "-I", "-S", "-c", SUPERVISOR, workdir, str(uid), str(gid)]


@dataclass(frozen=True)
class Delivery:
    """What the supervisor reads on stdin, and the mark its exit-status trailer starts with."""

    payload: bytes
    trailer_mark: bytes


def program_delivery(language: str, code: str, *, time_limit: float) -> Delivery:
    """The header line and the program, with a fresh nonce for the trailer."""
    if language not in RUNNERS:
        raise ValueError(f"no runner for language {language!r}")
    program = code.encode()
    nonce = secrets.token_hex(16)
    header = f"{language} {len(program)} {nonce} {watchdog_seconds(time_limit)}\n"
    return Delivery(
        payload=header.encode() + program,
        trailer_mark=_TRAILER_START + nonce.encode() + b":",
    )
