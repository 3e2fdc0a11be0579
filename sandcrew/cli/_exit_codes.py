"""The one exit-code table of every command (docs/exit-codes-and-formats.md repeats it for users).

``solve`` and ``suite`` follow the shell's conventions; ``run`` follows ``docker run`` and
``timeout(1)``, so that the program's own exit code passes through untouched and a script
can tell it apart from sandcrew failing.
"""

from __future__ import annotations

import enum

from sandcrew.errors import UserError


class ExitCode(enum.IntEnum):
    OK = 0
    NOT_SOLVED = 1
    """``solve``: the crew did not answer; ``suite run``: tasks failed or regressed;
    ``suite evaluate``: samples left without a verdict (the sandbox failed)."""
    CHECK_FAILED = 1
    """``doctor``: a check failed (Docker unreachable is 3)."""
    SESSION_ENDED = 1
    """``repl``: the session ended on its own (idle timeout, lifetime, its container lost)."""
    USAGE = 2
    """Bad flags or configuration: no or unknown model, bad key or URL, missing image."""
    INFRASTRUCTURE = 3
    """Docker or the model endpoint could not be reached (after retries)."""
    RUN_TIMED_OUT = 124
    """``run``: the program reached its deadline (as ``timeout(1)``)."""
    RUN_FAILED = 125
    """``run``: sandcrew itself failed — usage, engine or image (as ``docker run``)."""
    RUN_OUT_OF_MEMORY = 137
    """``run``: the program was killed for exceeding its memory limit (128 + SIGKILL)."""
    INTERRUPTED = 130
    """Ctrl-C or SIGTERM (128 + SIGINT), every command: the REPL and the servers too."""


RUN_COMMAND = "run"
"""The command whose own failures all exit 125, since 1–3 may be the program's."""


def exit_code_for_error(error: BaseException, command: str | None) -> ExitCode:
    """The exit code of a command that ended with ``error`` instead of a result."""
    if isinstance(error, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    if command == RUN_COMMAND:
        return ExitCode.RUN_FAILED
    if isinstance(error, UserError):
        return ExitCode.USAGE
    # Infrastructure, or a model that keeps answering unusably: not the user's input.
    return ExitCode.INFRASTRUCTURE
