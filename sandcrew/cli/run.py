"""`sandcrew run FILE|-`: run a program in a throwaway hardened container."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from sandcrew.cli._docker import sandbox_config_from_options
from sandcrew.cli._files import files_from_paths, save_artifacts
from sandcrew.errors import UserError
from sandcrew.sandbox import Artifact, DockerSandbox, ExecutionResult

_LANGUAGE_BY_SUFFIX = {
    ".py": "python",
    ".sh": "bash",
    ".bash": "bash",
    ".js": "javascript",
    ".cjs": "javascript",
}

TIMEOUT_EXIT = 124
"""Exit code for a program killed at its deadline (as coreutils' `timeout`)."""
OOM_EXIT = 137
"""Exit code for a program killed for exceeding its memory limit (128 + SIGKILL)."""


def exit_code_for(result: ExecutionResult) -> int:
    """The exit code `sandcrew run` ends with: the program's own, or 124/137 when killed."""
    if result.timed_out:
        return TIMEOUT_EXIT
    if result.oom_killed:
        return OOM_EXIT
    return result.exit_code


def register(app: typer.Typer) -> None:
    @app.command()
    def run(
        source: Annotated[str, typer.Argument(help="Program file to run, or - for stdin.")],
        language: Annotated[
            str | None,
            typer.Option(
                "--language",
                "-l",
                help="python, bash or javascript (default: from the file name).",
            ),
        ] = None,
        timeout: Annotated[
            float | None, typer.Option(help="Wall-clock limit in seconds.", show_default="10")
        ] = None,
        memory: Annotated[
            str | None,
            typer.Option(help="Memory limit, Docker units (256m, 1g).", show_default="256m"),
        ] = None,
        network: Annotated[
            bool, typer.Option("--network", help="Allow network access (off by default).")
        ] = False,
        image: Annotated[
            str | None, typer.Option(help="Run in this image instead of the default one.")
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
        file: Annotated[
            list[Path] | None,
            typer.Option(
                "--file",
                "-f",
                help="Input file (or folder) put into the program's work dir; repeatable.",
            ),
        ] = None,
        out: Annotated[
            Path | None,
            typer.Option(help="Save the files the program writes into out/ to this folder."),
        ] = None,
    ) -> None:
        """Run FILE (or stdin) in a new hardened container and print what it printed.

        Exits with the program's exit code: 124 when it timed out, 137 when it was
        killed for using too much memory.
        """
        code, chosen_language = _read_program(source, language)
        config = sandbox_config_from_options(
            timeout=timeout, memory=memory, network=network, image=image, language=chosen_language
        )
        files = files_from_paths(file or [])
        result = DockerSandbox(config).run_sync(code, chosen_language, files=files)
        if out is not None:
            result = save_artifacts(result, out)
        if as_json:
            typer.echo(json.dumps(json_document(result), indent=2))
        else:
            _print_result(result)
        raise typer.Exit(exit_code_for(result))


INLINE_ARTIFACT_BYTES = 64 * 1024
"""``--json`` carries an artifact's bytes (base64) only up to this size; ``--out`` saves any."""


def json_document(result: ExecutionResult) -> dict[str, Any]:
    """The ``--json`` document: the result, and small artifacts' bytes as ``data_base64``."""
    document = result.model_dump(mode="json")
    for entry, artifact in zip(document["artifacts"], result.artifacts, strict=True):
        small = artifact.size <= INLINE_ARTIFACT_BYTES
        entry["data_base64"] = artifact.data_base64() if small else None
    return document


def _read_program(source: str, language: str | None) -> tuple[str, str]:
    if source == "-":
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
    for line in artifact_lines(result.artifacts):
        status.print(escape(line), style="dim", soft_wrap=True)
    if result.artifacts_truncated:
        status.print("some output files were left out: over the output limits", style="yellow")
    for note in result.artifacts_skipped:
        status.print(f"left out: out/{escape(note)}", style="yellow", soft_wrap=True)


def artifact_lines(artifacts: tuple[Artifact, ...] | list[Artifact]) -> list[str]:
    """One line per artifact: where it was saved, or that ``--out`` would save it."""
    lines = []
    for artifact in artifacts:
        where = f"saved to {artifact.path}" if artifact.path else "not saved (use --out DIR)"
        lines.append(f"out/{artifact.name} ({artifact.size} bytes, {artifact.media_type}): {where}")
    return lines
