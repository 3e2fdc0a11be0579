"""The supervisor inside every sandbox container: it runs the program and vouches for its end.

Every sandbox container starts as root with only the SETUID, SETGID, SETPCAP and
KILL capabilities (and no-new-privileges) and runs this small Python
supervisor, passed on the command line so the image needs nothing of ours. It
waits on stdin for ``"<language> <size> <nonce> <limit ms> <watchdog> <files
size> <artifact bytes> <artifact count>\\n"`` followed by exactly ``size`` bytes of
program and ``files size`` bytes of input files (see :func:`pack_files`),
prints one acknowledgement byte on stdout,
and forks a child that raises its own OOM score (so the kernel's OOM killer
takes the program, not the supervisor), unpacks the input files into the work
dir (a tmpfs owned by the run uid, opened to its group) while still root with
the run's gid (so they are root's, mode 0444: the program can read them, and
neither write them nor change their mode; names checked again, links never
followed), empties its capability bounding set, drops to the container's run
uid (``setgroups([])``, ``setresgid``, ``setresuid``), writes the program into
the work dir, makes the empty ``out`` folder and execs the language's
interpreter with stdin on ``/dev/null``.

Why the exit status cannot be forged: the nonce arrives on stdin, never in argv
or the environment, and lives only in the supervisor's memory (the child's copy
is gone with its ``exec``). The supervisor runs as root, a uid other than the
program's, and is not dumpable, so the program can neither ptrace it (our
seccomp profile also refuses ptrace), read its ``/proc/<pid>/mem`` or
``environ``, nor signal it. When the child has ended, or ``limit ms`` after
the acknowledgement (the run limit: then it kills every process of the
program), the supervisor SIGKILLs every other process of the container until
none is left (so nothing the program left behind can print after it). With an
artifact count above 0 it then forks a collector that drops to the run uid and
prints ``"\\x1e<nonce>:A<length>\\n"`` and the artifacts frame (a JSON listing
line, then the files' bytes) on stdout; the collector stops taking files after
:data:`~._deadlines.ARTIFACT_COLLECTION_SECONDS`, so a timed-out program's files
come back too, and a huge ``out`` folder cannot stretch the run. Last it
prints the trailer ``"\\x1e<nonce>:<status>\\n"`` (``T<status>`` when the run
limit ended the program) on stdout and on stderr and exits with the program's
status. Each stream is in order, so once both trailers are in, all
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

import math
import secrets
from dataclasses import dataclass

from ._deadlines import ARTIFACT_COLLECTION_SECONDS, watchdog_seconds
from ._languages import RUNNERS

ACKNOWLEDGEMENT = b"."
"""Printed on stdout by the supervisor once it has the program, before the program runs."""

SUPERVISOR_FAILED_EXIT = 125
"""The container's status when the supervisor itself could not run the program."""

SUPERVISOR_CAPABILITIES = ("SETUID", "SETGID", "SETPCAP", "KILL")
"""What the supervisor needs: drop to the run uid, empty the bounding set, end leftovers."""

_TRAILER_START = b"\x1e"  # ASCII record separator
_HEADER_LIMIT = 256
ARTIFACTS_FRAME = b"A"
"""After the trailer mark on stdout, this byte starts the artifacts frame (a status is digits)."""
OUTPUT_FOLDER = "out"
"""The folder of the work dir whose files come back as artifacts."""

# The supervisor's file helpers, outside the f-string below so braces stay plain.
# Input files are unpacked by the child, as root with the run's gid, before the
# program starts; artifacts are collected by another child as the run uid after every
# process of the program is gone, never following a link, regular files only.
_FILE_HELPERS = r"""
import errno, json, stat

def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]

def checked_name(name):
    parts = name.split("/")
    if not name or name.startswith("/") or any(
        part in ("", ".", "..") or "\x00" in part for part in parts
    ):
        raise ValueError("refused input file name " + repr(name))
    return parts

def unpack_files(blob):
    # Each file: name length (4 bytes), data length (8 bytes), name, data.
    position = 0
    while position < len(blob):
        name_size = int.from_bytes(blob[position:position + 4], "big")
        data_size = int.from_bytes(blob[position + 4:position + 12], "big")
        position += 12
        name = bytes(blob[position:position + name_size]).decode("utf-8")
        position += name_size
        data = blob[position:position + data_size]
        position += data_size
        parts = checked_name(name)
        folder = workdir
        for part in parts[:-1]:
            folder = os.path.join(folder, part)
            try:
                os.mkdir(folder, 0o755)
            except FileExistsError:
                pass
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        handle = os.open(os.path.join(workdir, name), flags, 0o444)
        try:
            write_all(handle, data)
        finally:
            os.close(handle)

def shown_name(name):
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")

def collect_artifacts(limit_bytes, limit_count, give_up):
    found, contents, skipped = [], [], []
    state = {"total": 0, "truncated": False, "late": False}

    def skip(name, reason):
        if len(skipped) < 20:
            skipped.append(shown_name(name) + ": " + reason)

    def walk(folder, prefix, depth):
        for name in sorted(os.listdir(folder)):
            path = prefix + name
            if state["late"] or time.monotonic() > give_up:
                if not state["late"]:
                    skip(path, "not collected in time, nor what follows it")
                state["late"] = state["truncated"] = True
                return
            try:
                path.encode("utf-8")
            except UnicodeEncodeError:
                skip(path, "the name is not UTF-8")
                continue
            if any(ord(character) < 32 or ord(character) == 127 for character in name):
                skip(repr(path), "control characters in the name")
                continue
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
            try:
                handle = os.open(name, flags, dir_fd=folder)
            except OSError as error:
                skip(path, "a symbolic link" if error.errno == errno.ELOOP else error.strerror)
                continue
            try:
                info = os.fstat(handle)
                if stat.S_ISDIR(info.st_mode):
                    if depth < 8:
                        walk(handle, path + "/", depth + 1)
                    else:
                        skip(path, "nested too deep")
                    continue
                if not stat.S_ISREG(info.st_mode):
                    skip(path, "not a regular file")
                    continue
                if len(found) >= limit_count or state["total"] + info.st_size > limit_bytes:
                    state["truncated"] = True
                    skip(path, "over the artifact limits")
                    continue
                chunks, size = [], 0
                while size < info.st_size:
                    chunk = os.read(handle, min(1 << 20, info.st_size - size))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                found.append({"name": path, "size": size})
                contents.append(b"".join(chunks))
                state["total"] += size
            finally:
                os.close(handle)

    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        top = os.open(os.path.join(workdir, OUTPUT_FOLDER), flags)
    except OSError as error:
        top = None
        if error.errno != errno.ENOENT:
            skip(OUTPUT_FOLDER, "not a folder")
    if top is not None:
        walk(top, "", 0)
    listing = {"files": found, "skipped": skipped, "truncated": state["truncated"]}
    return json.dumps(listing).encode() + b"\n" + b"".join(contents)
"""


def _runner_table() -> dict[str, tuple[str, tuple[str, ...], dict[str, str], dict[str, str]]]:
    return {
        language: (
            runner.filename,
            runner.interpreter,
            dict(runner.environment),
            dict(runner.support_files),
        )
        for language, runner in RUNNERS.items()
    }


# Run as `python3 -I -S -c SUPERVISOR <workdir> <uid> <gid>` (isolated, no site:
# nothing from the image's environment or site-packages runs as root).
SUPERVISOR = (
    f"""
import ctypes, os, signal, sys, time
RUNNERS = {_runner_table()!r}
FAILED = {SUPERVISOR_FAILED_EXIT}
OUTPUT_FOLDER = {OUTPUT_FOLDER!r}
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no ptrace, no /proc/<pid>/mem for anyone
workdir, uid, gid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
"""
    + _FILE_HELPERS
    + f"""

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
    language, size, nonce, limit_ms, watchdog, files_size, artifact_bytes, artifact_count = (
        line.decode().split(" ")
    )
    size, limit_ms, watchdog, files_size = int(size), int(limit_ms), int(watchdog), int(files_size)
    artifact_bytes, artifact_count = int(artifact_bytes), int(artifact_count)
except ValueError:
    fail("unreadable header")
runner = RUNNERS.get(language)
if runner is None:
    fail("no interpreter for language " + repr(language))
watchdog_at = time.monotonic() + watchdog

def arm_watchdog():
    signal.signal(signal.SIGALRM, on_watchdog)
    signal.setitimer(signal.ITIMER_REAL, max(watchdog_at - time.monotonic(), 0.001))

arm_watchdog()
chunks = [data]
received = len(data)
while received < size + files_size:
    chunk = os.read(0, min(size + files_size - received, 1 << 20))
    if not chunk:
        fail("the program ended early")
    chunks.append(chunk)
    received += len(chunk)
everything = b"".join(chunks)
program, files = everything[:size], memoryview(everything)[size:]
del chunks, data
filename, interpreter, variables, support_files = runner
say(1, {ACKNOWLEDGEMENT!r})

def become_the_run_uid():
    signal.setitimer(signal.ITIMER_REAL, 0)
    for number in (signal.SIGALRM, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(number, signal.SIG_DFL)
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

def become_the_program():
    with open("/proc/self/oom_score_adj", "w") as handle:
        handle.write("1000")
    # The work dir is the run uid's: as that uid for a moment (effective only, root stays
    # the real and saved uid), it is opened to its group, the run's gid. Then, as root with
    # that gid, the input files are written: they are root's, so the program can read them
    # but neither write them nor change their mode.
    os.setegid(gid)
    os.seteuid(uid)
    os.chmod(workdir, 0o770)
    os.seteuid(0)
    unpack_files(files)
    become_the_run_uid()
    path = os.path.join(workdir, filename)
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    say(handle, program)
    os.close(handle)
    for support_path, text in support_files.items():
        os.makedirs(os.path.dirname(support_path), 0o700, exist_ok=True)
        handle = os.open(support_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o400)
        write_all(handle, text.encode())
        os.close(handle)
    if artifact_count > 0:
        os.mkdir(os.path.join(workdir, OUTPUT_FOLDER), 0o700)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    environment = dict(os.environ)
    environment.update(variables)
    os.execvpe(interpreter[0], [*interpreter, path], environment)

# The run limit counts from the acknowledgement. When it is up, every process of the
# program is killed; what it left in out/ is still collected and sent.
run_state = {{"running": True, "timed_out": False}}

def on_program_deadline(number, frame):
    if run_state["running"]:
        run_state["timed_out"] = True
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
    arm_watchdog()

signal.signal(signal.SIGALRM, on_program_deadline)
signal.setitimer(signal.ITIMER_REAL, limit_ms / 1000)
child = os.fork()
if child == 0:
    try:
        become_the_program()
    except BaseException as error:
        say(2, ("sandcrew: cannot start the program: " + str(error) + "\\n").encode())
    os._exit(FAILED)
if run_state["timed_out"]:  # the limit passed before the program existed
    os.kill(child, signal.SIGKILL)
del program, files, everything
os.close(0)
while True:
    ended, status = os.waitpid(child, 0)
    if ended == child:
        break
run_state["running"] = False
arm_watchdog()
code = os.waitstatus_to_exitcode(status)
# Timed out only when the limit's kill ended the program, not when it ended just before.
timed_out = run_state["timed_out"] and code == -signal.SIGKILL
if code < 0:
    code = 128 - code
end_every_other_process(5.0)
# The program shared this process's stdout and stderr (the same open files): it may have
# made them non-blocking, which would cut the artifacts frame and the trailer short. No
# process of it is left to change them again.
for stream in (1, 2):
    try:
        os.set_blocking(stream, True)
    except OSError:
        pass
mark = {_TRAILER_START!r} + nonce.encode() + b":"
if artifact_count > 0:
    collector = os.fork()
    if collector == 0:
        try:
            become_the_run_uid()
            give_up = time.monotonic() + {ARTIFACT_COLLECTION_SECONDS}
            frame = collect_artifacts(artifact_bytes, artifact_count, give_up)
            write_all(1, mark + {ARTIFACTS_FRAME!r} + str(len(frame)).encode() + b"\\n" + frame)
        except BaseException as error:
            say(2, ("sandcrew: cannot collect the output files: " + str(error) + "\\n").encode())
        os._exit(0)
    os.waitpid(collector, 0)
    end_every_other_process(5.0)
# A "T" before the status: the run limit ended the program.
trailer = mark + (b"T" if timed_out else b"") + str(code).encode() + b"\\n"
say(1, trailer)
say(2, trailer)
os._exit(code)
"""
)


def supervisor_command(workdir: str, uid: int, gid: int) -> list[str]:
    """The container command: the supervisor, with the work dir and the run's uid and gid."""
    return ["python3", "-I", "-S", "-c", SUPERVISOR, workdir, str(uid), str(gid)]


@dataclass(frozen=True)
class Delivery:
    """What the supervisor reads on stdin, and the mark its exit-status trailer starts with."""

    payload: bytes
    trailer_mark: bytes


def pack_files(files: dict[str, bytes]) -> bytes:
    """The input files as the supervisor reads them: name and data lengths, name, data."""
    parts: list[bytes] = []
    for name, data in files.items():
        encoded = name.encode()
        parts.append(len(encoded).to_bytes(4, "big") + len(data).to_bytes(8, "big"))
        parts.append(encoded)
        parts.append(data)
    return b"".join(parts)


def program_delivery(
    language: str,
    code: str,
    *,
    time_limit: float,
    files: dict[str, bytes] | None = None,
    artifact_bytes: int = 0,
    artifact_count: int = 0,
) -> Delivery:
    """The header line, the program and its input files, with a fresh nonce for the trailer.

    With ``artifact_count`` > 0 the program gets an empty ``out`` folder, and
    what it leaves there (up to the caps) comes back in a frame before the trailer.
    """
    if language not in RUNNERS:
        raise ValueError(f"no runner for language {language!r}")
    program = code.encode()
    packed = pack_files(files or {})
    nonce = secrets.token_hex(16)
    header = (
        f"{language} {len(program)} {nonce} {math.ceil(time_limit * 1000)} "
        f"{watchdog_seconds(time_limit)} "
        f"{len(packed)} {artifact_bytes} {artifact_count}\n"
    )
    return Delivery(
        payload=header.encode() + program + packed,
        trailer_mark=_TRAILER_START + nonce.encode() + b":",
    )
