"""`sandcrew run FILE|-`: run a program in a throwaway hardened container."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from sandcrew.cli import _options as options
from sandcrew.cli import _output
from sandcrew.cli._exit_codes import ExitCode
from sandcrew.errors import UserError
from sandcrew.sandbox import DockerSandbox, ExecutionResult

_LANGUAGE_BY_SUFFIX = {".py": "python", ".sh": "bash", ".bash": "bash"}


def exit_code_for(result: ExecutionResult) -> int:
    """The exit code `sandcrew run` ends with: the program's own, or 124/137 when killed."""
    if result.timed_out:
        return ExitCode.RUN_TIMED_OUT
    if result.oom_killed:
        return ExitCode.RUN_OUT_OF_MEMORY
    return result.exit_code


def run(
    source: Annotated[str, typer.Argument(help="Program file to run, or - for stdin.")],
    language: Annotated[
        options.Language | None,
        typer.Option(
            "--language", "-l", help="The program's language (default: from the file name)."
        ),
    ] = None,
    run_timeout: options.RunTimeoutOrTimeout = None,
    memory: options.Memory = None,
    network: Annotated[
        bool, typer.Option("--network", help="Allow network access (off by default).")
    ] = False,
    image: Annotated[
        str | None, typer.Option(help="Run in this image instead of the default one.")
    ] = None,
    config: options.Config = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Run FILE (or stdin) in a new hardened container and print what it printed.

    Exit codes (as docker run): the program's own; 124 timed out; 137 killed for using too
    much memory; 125 sandcrew itself failed (bad option, Docker, image).
    """
    settings = options.settings_from_options(
        config=config,
        sandbox=options.sandbox_flags(
            run_timeout=run_timeout,
            memory=memory,
            image=image,
            language=language.value if language else None,
            network=network,
        ),
    )
    code, chosen_language = _read_program(source, language.value if language else None)
    result = DockerSandbox(settings.sandbox).run_sync(code, chosen_language)
    if as_json:
        _output.print_json(result.model_dump(mode="json"))
    else:
        _print_result(result)
    raise typer.Exit(exit_code_for(result))


def _read_program(source: str, language: str | None) -> tuple[str, str]:
    if source == "-":
        if sys.stdin is None:
            raise UserError("stdin is closed: give a file, or pipe the program in")
        raw, language = sys.stdin.buffer.read(), language or "python"
    else:
        path = Path(source)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise UserError(f"no such file: {source}") from None
        except OSError as error:
            raise UserError(f"cannot read {source}: {error}") from None
        language = language or _LANGUAGE_BY_SUFFIX.get(path.suffix.lower(), "python")
    try:
        return raw.decode("utf-8"), language
    except UnicodeDecodeError as error:
        shown = "stdin" if source == "-" else source
        raise UserError(
            f"{shown} is not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None


def _print_result(result: ExecutionResult) -> None:
    sys.stdout.write(result.stdout)
    sys.stdout.flush()
    if result.stderr:
        sys.stderr.write(result.stderr)
    status = Console(stderr=True, highlight=False)
    notes = []
    if result.stdout_truncated:
        notes.append("stdout truncated")
    if result.stderr_truncated:
        notes.append("stderr truncated")
    if result.timed_out:
        headline = "[red]timed out[/]"
    elif result.oom_killed:
        headline = "[red]killed: out of memory[/]"
    elif result.exit_code == 0:
        headline = "[green]exit 0[/]"
    else:
        headline = f"[red]exit {result.exit_code}[/]"
    extra = f" · {', '.join(notes)}" if notes else ""
    status.print(
        f"{headline} · {result.duration:.2f}s · {escape(result.image)}{extra}", style="dim"
    )
