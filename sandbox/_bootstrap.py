"""How a program gets into its container and how its end comes back out.

Every sandbox container starts a tiny shell bootstrap that waits on stdin for
``"<language> <size> <nonce> <watchdog>\n"`` followed by exactly ``size``
bytes of program. It writes the program into the work dir (a tmpfs), prints one
acknowledgement byte on stdout and runs the language's interpreter on the file
with stdin on ``/dev/null``, so ``input()`` sees EOF at once. The language
travels in the header, so one started container can serve any language its
image holds; that is what lets a pool start containers before it knows what
they will run.

The acknowledgement tells a container that died before it read its program
(nothing ran, so the run may safely go to another container) from a program
that ran and failed. When the interpreter has exited, the bootstrap prints a
trailer with its exit status on stdout and on stderr: each stream is in order,
so once both trailers are in, all the program's output is. That saves waiting
for the engine to tear the container down. The trailer starts with a per-run
random nonce no honest program prints; a program that forges it can only cut
its own output short. The stream reader strips both marks.

The host kills the container at the run's deadline. So that a container
outlives a host process killed mid-run by no more than a few seconds, the
bootstrap also starts a watchdog once it has its header: ``watchdog`` seconds
later (the time limit plus :data:`WATCHDOG_GRACE`, so the host's kill normally
comes first) it SIGKILLs every process the sandbox user may signal, which ends
the container. The watchdog holds two of the container's pids (a subshell and
its ``sleep``); the pids limit counts them.
"""

from __future__ import annotations

import math
import secrets
import shlex
from dataclasses import dataclass

from ._languages import RUNNERS

ACKNOWLEDGEMENT = b"."
"""Printed on stdout by the bootstrap once the program is written, before the interpreter runs."""

WATCHDOG_GRACE = 5.0
"""Seconds past the run's deadline after which the container ends itself."""

_BOOTSTRAP_FAILED_EXIT = 125
_TRAILER_START = b"\x1e"  # ASCII record separator


def _case_arms(workdir_variable: str) -> str:
    arms = []
    for language, runner in RUNNERS.items():
        exports = " ".join(f"{name}={shlex.quote(value)}" for name, value in runner.environment)
        export = f"export {exports}; " if exports else ""
        interpreter = " ".join(shlex.quote(part) for part in runner.interpreter)
        program = f'"{workdir_variable}"/{shlex.quote(runner.filename)}'
        arms.append(f"{shlex.quote(language)}) {export}set -- {program} {interpreter};;")
    return "\n".join(arms)


# The shell's own stderr goes nowhere (dash would report "Killed" there); the
# stream is kept on fd 3 for the interpreter, the trailer and the bootstrap's
# errors. The interpreter's redirections happen in a subshell that becomes it,
# as dash reports a killed command on that command's own stderr.
# `read` consumes the header byte by byte, so `head` gets exactly the program.
# Only builtins run after the interpreter: they work even when a fork bomb
# holds every pid. $1 is the work dir. `kill -KILL -1` spares only the
# watchdog itself and PID 1 (the init, which then ends with its child).
BOOTSTRAP = f"""exec 3>&2 2>/dev/null
IFS=' ' read -r language size nonce watchdog || exit {_BOOTSTRAP_FAILED_EXIT}
(sleep "$watchdog"; kill -KILL -1) < /dev/null > /dev/null 3>&- &
case "$language" in
{_case_arms("$1")}
*) echo "sandcrew: no interpreter for language '$language'" >&3; exit {_BOOTSTRAP_FAILED_EXIT};;
esac
program="$1"; shift
head -c "$size" > "$program" 2>&3 || exit {_BOOTSTRAP_FAILED_EXIT}
printf {ACKNOWLEDGEMENT.decode()}
(exec "$@" "$program" < /dev/null 2>&3 3>&-)
status=$?
printf '\\{_TRAILER_START[0]:03o}%s:%s\\n' "$nonce" "$status"
printf '\\{_TRAILER_START[0]:03o}%s:%s\\n' "$nonce" "$status" >&3
exit "$status"
"""


def bootstrap_command(workdir: str) -> list[str]:
    """The container command: the bootstrap, with the work dir as its argument."""
    return ["/bin/sh", "-c", BOOTSTRAP, "sandcrew", workdir]


@dataclass(frozen=True)
class Delivery:
    """What the bootstrap reads on stdin, and the mark its exit-status trailer starts with."""

    payload: bytes
    trailer_mark: bytes


def program_delivery(language: str, code: str, *, time_limit: float) -> Delivery:
    """The header line and the program, with a fresh nonce for the trailer."""
    if language not in RUNNERS:
        raise ValueError(f"no runner for language {language!r}")
    program = code.encode()
    nonce = secrets.token_hex(12)
    watchdog = math.ceil(time_limit + WATCHDOG_GRACE)
    return Delivery(
        payload=f"{language} {len(program)} {nonce} {watchdog}\n".encode() + program,
        trailer_mark=_TRAILER_START + nonce.encode() + b":",
    )
