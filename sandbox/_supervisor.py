"""The supervisor inside every sandbox container (:mod:`._inside.supervisor`): its protocol.

Every sandbox container starts as root with only the SETUID, SETGID, SETPCAP and
KILL capabilities (and no-new-privileges) and runs the small Python
supervisor of :mod:`._inside.supervisor`, whose source travels in the command
(:func:`._inside_command.inside_command`) so the image needs nothing of ours. It
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

A Python program's process starts earlier: the supervisor forks it as soon as it
starts (in a pooled container, before the header; in a cold one, right after
it), the child drops to the run uid the same way and execs ``python3 main.py``,
and the interpreter waits in its own start-up (the sandbox's sitecustomize,
:mod:`._inside.runners`) for the program on a pipe. The supervisor then unpacks
the input files in a short-lived child (root with the run's gid, as above) and
sends the program; the waiting code writes ``main.py`` and the ``out`` folder as
the run uid, puts the container's stdout and stderr back on 1 and 2 and passes
on to stderr what the interpreter's start printed. Python then opens ``main.py``
as ``python3 main.py`` always does. If the waiting interpreter has ended by the
time the run comes, or the run is in another language, it is ended and the
program starts as above.

Why the exit status cannot be forged: the nonce arrives on stdin, never in argv
or the environment, and lives only in the supervisor's memory (a child's copy
is gone with its ``exec``; a pooled container's Python program forks before it
comes). The supervisor runs as root, a uid other than the
program's, and is not dumpable, so the program can neither ptrace it (our
seccomp profile also refuses ptrace), read its ``/proc/<pid>/mem`` or
``environ``, nor signal it. When the child has ended, or ``limit ms`` after
the acknowledgement (the run limit: then it kills every process of the
program), the supervisor SIGKILLs every other process of the container until
none is left (so nothing the program left behind can print after it). With an
artifact count above 0 it then forks a collector that drops to the run uid and
prints ``"\\x1e<nonce>:A<length>\\n"`` and the artifacts frame (a JSON listing
line, then the files' bytes) on stdout; the collector stops taking files after
:data:`~._inside.files.ARTIFACT_COLLECTION_SECONDS`, so a timed-out program's files
come back too, and a huge ``out`` folder cannot stretch the run. Last it
prints the trailer ``"\\x1e<nonce>:<status>\\n"`` (``T<status>`` when the run
limit ended the program) on stdout and on stderr and exits with the program's
status. Each stream is in order, so once both trailers are in, all
the program's output is; the stream reader strips them. A program can print
any bytes, but not the nonce. The host keeps stdin open until it has the
result: if it closes first (the engine closes it when the host's process
dies), the supervisor kills every process and the container exits with 143.

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

from ._deadlines import watchdog_seconds
from ._inside.files import OUTPUT_FOLDER, pack_files
from ._inside.framing import ACKNOWLEDGEMENT, ARTIFACTS_FRAME, trailer_mark
from ._inside_command import inside_command
from ._languages import RUNNERS

__all__ = [
    "ACKNOWLEDGEMENT",
    "ARTIFACTS_FRAME",
    "OUTPUT_FOLDER",
    "SUPERVISOR_CAPABILITIES",
    "Delivery",
    "pack_files",
    "program_delivery",
    "supervisor_command",
]

SUPERVISOR_CAPABILITIES = ("SETUID", "SETGID", "SETPCAP", "KILL")
"""What the supervisor needs: drop to the run uid, empty the bounding set, end leftovers."""


def supervisor_command(
    workdir: str, uid: int, gid: int, *, proxy_socket: str | None = None
) -> list[str]:
    """The container command: the supervisor, with the work dir and the run's uid and gid.

    With ``proxy_socket`` (the host proxy's socket as the container sees it) the
    supervisor first starts the relay of :mod:`._inside.relay` to it.
    """
    extra = () if proxy_socket is None else (proxy_socket,)
    return inside_command("supervisor", workdir, str(uid), str(gid), *extra)


@dataclass(frozen=True)
class Delivery:
    """What the supervisor reads on stdin, and the mark its exit-status trailer starts with."""

    payload: bytes
    trailer_mark: bytes


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
    return Delivery(payload=header.encode() + program + packed, trailer_mark=trailer_mark(nonce))
