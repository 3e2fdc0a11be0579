"""`sandcrew run FILE|-`: run a program in a throwaway hardened container."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import typer

from sandcrew.cli import _options as options, _output
from sandcrew.cli._errors import Interrupted
from sandcrew.cli._exit_codes import ExitCode
from sandcrew.cli._files import check_out_folder, files_from_paths, save_run_files
from sandcrew.cli._terminal import UntrustedWriter, reset_attributes, visible_controls
from sandcrew.core import NotARegularFile, read_regular_file
from sandcrew.errors import UserError
from sandcrew.sandbox import Artifact, DockerSandbox, ExecutionResult, OutputEvent

_LANGUAGE_BY_SUFFIX = {
    ".py": "python",
    ".sh": "bash",
    ".bash": "bash",
    ".js": "javascript",
    ".cjs": "javascript",
}


def exit_code_for(result: ExecutionResult) -> int:
    """The exit code `sandcrew run` ends with: the program's own, or 124/137 when killed."""
    if result.timed_out:
        return ExitCode.RUN_TIMED_OUT
    if result.oom_killed:
        return ExitCode.RUN_OUT_OF_MEMORY
    return result.exit_code


def run(
    source: Annotated[
        str, typer.Argument(metavar="FILE", help="Program file to run, or - for stdin.")
    ],
    language: Annotated[
        options.Language | None,
        typer.Option(
            "--language", "-l", help="The program's language (default: from the file name)."
        ),
    ] = None,
    run_timeout: options.RunTimeoutOrTimeout = None,
    memory: options.Memory = None,
    network: options.Network = False,
    allow_host: options.AllowHost = None,
    secret_header: options.SecretHeader = None,
    image: Annotated[
        str | None, typer.Option(help="Run in this image instead of the default one.")
    ] = None,
    config: options.Config = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    file: options.InputFiles = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Save the files the program writes into out/ to this folder (into a new "
            "folder inside it when it is not empty; nothing is replaced)."
        ),
    ] = None,
) -> None:
    """Run FILE (or stdin) in a new hardened container, showing its output as it comes.

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
            allow_hosts=allow_host,
            secret_headers=secret_header,
        ),
    )
    chosen_language = language.value if language else _language_of(source)
    code = read_program(source, limit=settings.sandbox.max_code_bytes)
    files = files_from_paths(file or [])
    check_out_folder(out)
    sandbox = DockerSandbox(settings.sandbox)
    # The program's output is untrusted: on a terminal its control sequences are shown, not run.
    writers = {"stdout": UntrustedWriter(sys.stdout), "stderr": UntrustedWriter(sys.stderr)}

    def show(chunk: OutputEvent) -> None:
        writers[chunk.stream].write(chunk.text)

    # The result is shown as soon as it is in; the container's removal, begun then, goes on
    # meanwhile, and leaving the block waits for it: the command never ends before it.
    with sandbox:
        try:
            result = asyncio.run(
                sandbox.run(code, chosen_language, files=files, on_output=None if as_json else show)
            )
        except KeyboardInterrupt:
            # A cancelled run removes its container before it raises.
            raise Interrupted("the program was stopped and its container removed") from None
        finally:
            for writer in writers.values():
                writer.end()
        where = None
        if out is not None:
            [result], where = save_run_files([result], out)
        if as_json:
            _output.print_json(json_document(result))
        else:
            _print_status(result, saving=out is not None, where=where)
    # Raised out here: an exit raised inside would hide a failed removal.
    raise typer.Exit(exit_code_for(result))


def json_document(result: ExecutionResult) -> dict[str, Any]:
    """The ``--json`` document: the result as JSON, artifacts' bytes as ``data_base64`` up to
    :data:`~sandcrew.sandbox.INLINE_BYTES` (``--out`` saves any)."""
    return result.model_dump(mode="json")


def _language_of(source: str) -> str:
    if source == "-":
        return "python"
    return _LANGUAGE_BY_SUFFIX.get(Path(source).suffix.lower(), "python")


def read_program(source: str, *, limit: int) -> str:
    """The program text of ``source`` (a path, or ``-`` for stdin), at most ``limit`` bytes.

    A path must name a regular file (a FIFO, a device or a folder is refused, never
    waited on). Reads at most ``limit + 1`` bytes, so an endless source (``/dev/zero``, a
    huge pipe) costs no more memory than the cap before it is refused.
    """
    shown = "stdin" if source == "-" else source
    if source == "-":
        if sys.stdin is None:
            raise UserError("stdin is closed: give a file, or pipe the program in")
        raw = _read_at_most(sys.stdin.buffer, limit + 1, shown)
    else:
        try:
            raw = read_regular_file(source, limit)
        except FileNotFoundError:
            raise UserError(f"no such file: {source}") from None
        except NotARegularFile:
            raise UserError(
                f"cannot read {source}: not a regular file (give a file, or - for stdin)"
            ) from None
        except OSError as error:
            raise UserError(f"cannot read {source}: {error}") from None
    if len(raw) > limit:
        raise UserError(f"{shown} is larger than the sandbox accepts (at most {limit} bytes)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UserError(
            f"{shown} is not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None


def _read_at_most(file: BinaryIO, size: int, shown: str) -> bytes:
    try:
        # A buffered read(size) returns early only at end of file.
        return file.read(size)
    except OSError as error:
        raise UserError(f"cannot read {shown}: {error}") from None


def _print_status(result: ExecutionResult, *, saving: bool, where: str | None) -> None:
    from rich.markup import escape  # after the result: it overlaps the container's removal

    reset_attributes(sys.stderr)
    status = _output.console(stderr=True, highlight=False)
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
    for line in artifact_lines(result.artifacts, saving=saving):
        status.print(escape(line), style="dim", soft_wrap=True)
    if where is not None:
        status.print(escape(where), style="yellow", soft_wrap=True)
    if result.artifacts_truncated:
        status.print("some output files were left out: over the output limits", style="yellow")
    for note in result.artifacts_skipped:
        status.print(f"left out: out/{escape(note)}", style="yellow", soft_wrap=True)
    if result.network is not None:
        for line in result.network.runner_lines(limit=20)[1:]:
            style = "yellow" if line.startswith("denied") else "dim"
            status.print(escape(visible_controls(line)), style=style, soft_wrap=True)


def artifact_lines(artifacts: tuple[Artifact, ...] | list[Artifact], *, saving: bool) -> list[str]:
    """One line per artifact: where it was saved, or that it was not (``--out`` saves them)."""
    lines = []
    unsaved = "not saved (see the note below)" if saving else "not saved (use --out DIR)"
    for artifact in artifacts:
        where = f"saved to {artifact.path}" if artifact.path else unsaved
        lines.append(f"out/{artifact.name} ({artifact.size} bytes, {artifact.media_type}): {where}")
    return lines
