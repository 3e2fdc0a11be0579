"""Every way a command can end becomes one exit code of the table and at most one error line.

Usage errors (click's), sandcrew's own errors, Ctrl-C and an unwritable stdout all end
here: one line on stderr (a JSON object with ``--json``), never a traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import typer

from sandcrew.cli._exit_codes import ExitCode, exit_code_for_error
from sandcrew.cli._output import json_text
from sandcrew.cli._terminal import visible_controls
from sandcrew.errors import InfrastructureError, SandcrewError, UserError

ERROR_FORMAT = 1
"""Version of the ``--json`` error object."""


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM) stopped the command once it had cleaned up; the message says what
    was stopped and what was cleaned up, for the one line the command ends with."""


def run_with_clean_errors(app: typer.Typer, args: Sequence[str] | None = None) -> int:
    """Run the typer app and return the exit code of the table; errors are one line."""
    arguments = list(sys.argv[1:] if args is None else args)
    command = next((argument for argument in arguments if not argument.startswith("-")), None)
    as_json = "--json" in arguments
    if sys.stdout is None:
        return report_error(
            UserError("stdout is closed; redirect it to a file or /dev/null instead"),
            command=command,
            as_json=as_json,
        )
    try:
        outcome = app(args=arguments, prog_name="sandcrew", standalone_mode=False)
        sys.stdout.flush()
    except typer.Exit as done:
        return _flushed(done.exit_code, command, as_json)
    except typer.Abort:
        return ExitCode.INTERRUPTED
    except (KeyboardInterrupt, Interrupted) as error:
        return report_error(error, command=command, as_json=as_json)
    except typer.TyperException as error:
        if type(error).__name__ == "NoArgsIsHelpError":
            # `sandcrew` or `sandcrew suite` alone: the help is the answer, on stderr.
            _write_stderr(_message_of(error) + "\n")
            return ExitCode.USAGE
        return report_error(_usage_error(error), command=command, as_json=as_json)
    except SandcrewError as error:
        return report_error(error, command=command, as_json=as_json)
    except OSError as error:
        return report_error(_output_error(error), command=command, as_json=as_json)
    return _flushed(outcome if isinstance(outcome, int) else ExitCode.OK, command, as_json)


def _flushed(code: int, command: str | None, as_json: bool) -> int:
    try:
        sys.stdout.flush()
    except OSError as error:
        return report_error(_output_error(error), command=command, as_json=as_json)
    return code


def report_error(error: BaseException, *, command: str | None, as_json: bool) -> int:
    """Write ``error`` as one line on stderr; return its exit code."""
    if isinstance(error, Interrupted):
        code = ExitCode.INTERRUPTED
    else:
        code = exit_code_for_error(error, command)
    if isinstance(error, KeyboardInterrupt):
        message = "interrupted"
    else:
        message = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    if as_json:
        line = json_text(
            {
                "format": ERROR_FORMAT,
                "error": {"kind": error_kind(error), "message": message},
                "exit_code": int(code),
            }
        )
    elif isinstance(error, Interrupted):
        line = f"Interrupted: {message}."
    else:
        # A message may quote a model's or a program's text: shown, never obeyed.
        line = f"error: {visible_controls(message)}"
    _write_stderr(line + "\n")
    if isinstance(error, OSError | _OutputError):
        # Python flushes stdout once more at exit; make that one quiet.
        _silence_stdout()
    return code


def error_kind(error: BaseException) -> str:
    if isinstance(error, KeyboardInterrupt | Interrupted):
        return "interrupted"
    if isinstance(error, UserError):
        return "usage"
    if isinstance(error, InfrastructureError):
        return str(error.code)
    return "error"


class _OutputError(UserError):
    """stdout cannot take our output (closed pipe, full disk, /dev/full)."""


def _output_error(error: OSError) -> _OutputError:
    reason = error.strerror or str(error)
    return _OutputError(f"cannot write the output: {reason}")


def _message_of(error: typer.TyperException) -> str:
    format_message = getattr(error, "format_message", None)
    return str(format_message() if callable(format_message) else error)


def _usage_error(error: typer.TyperException) -> UserError:
    message = _message_of(error).replace("Value error, ", "")
    parameter = getattr(error, "param", None)
    hint = getattr(parameter, "opts", None)
    if hint and not message.startswith(("Invalid value for", "Option", "Missing", "No such")):
        message = f"{'/'.join(hint)}: {message}"
    context = getattr(error, "ctx", None)
    if context is not None:
        message += f" (see: {context.command_path} --help)"
    return UserError(message)


def _write_stderr(text: str) -> None:
    if sys.stderr is None:
        return
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except OSError:
        pass


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, AttributeError, ValueError):
        pass
