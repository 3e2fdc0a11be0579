"""`sandcrew solve TASK`: the crew writes, reviews and runs code until the task is answered."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Annotated, Any

import typer
from rich.console import Console, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from sandcrew.agents import FunctionCallRequiredError, Message, render_message
from sandcrew.cli._docker import sandbox_overrides
from sandcrew.cli._files import files_from_paths, save_artifacts
from sandcrew.cli.run import artifact_lines
from sandcrew.crew import CrewMode, CrewResult, solve_task
from sandcrew.errors import UserError
from sandcrew.sandbox import ExecutionResult, load_input_files
from sandcrew.settings import load_crew_settings

NOT_SOLVED_EXIT = 1


def register(app: typer.Typer) -> None:
    @app.command()
    def solve(
        task: Annotated[
            str, typer.Argument(help='The task, e.g. "What\'s the 39th fibonacci number?"')
        ],
        model: Annotated[
            str | None, typer.Option(help="Model for every role.", show_default="gpt-4o-mini")
        ] = None,
        base_url: Annotated[
            str | None,
            typer.Option(help="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1."),
        ] = None,
        admin_model: Annotated[str | None, typer.Option(help="Model for the admin.")] = None,
        coder_model: Annotated[str | None, typer.Option(help="Model for the coder.")] = None,
        reviewer_model: Annotated[str | None, typer.Option(help="Model for the reviewer.")] = None,
        mode: Annotated[
            CrewMode | None,
            typer.Option(
                help="Speaker selection: workflow, admin or workflow+admin.",
                show_default="workflow",
            ),
        ] = None,
        max_rounds: Annotated[
            int | None, typer.Option(help="Agent replies before giving up.", show_default="20")
        ] = None,
        max_tokens: Annotated[
            int | None, typer.Option(help="Token budget for the whole chat.")
        ] = None,
        timeout: Annotated[
            float | None, typer.Option(help="Wall-clock budget for the whole chat, seconds.")
        ] = None,
        image: Annotated[str | None, typer.Option(help="Sandbox image for the runs.")] = None,
        run_timeout: Annotated[
            float | None,
            typer.Option(help="Wall-clock limit of each run, seconds.", show_default="10"),
        ] = None,
        memory: Annotated[
            str | None,
            typer.Option(help="Memory limit of each run (256m, 1g).", show_default="256m"),
        ] = None,
        config: Annotated[
            Path | None,
            typer.Option(help="TOML settings file (default ~/.config/sandcrew/config.toml)."),
        ] = None,
        as_json: Annotated[
            bool, typer.Option("--json", help="Print the outcome as JSON instead of the chat.")
        ] = False,
        transcript: Annotated[
            Path | None,
            typer.Option(help="Write every message, tool call and run as JSON lines to FILE."),
        ] = None,
        quiet: Annotated[
            bool, typer.Option("--quiet", "-q", help="Print only the final answer.")
        ] = False,
        file: Annotated[
            list[Path] | None,
            typer.Option(
                "--file", "-f", help="Input file (or folder) every run receives; repeatable."
            ),
        ] = None,
        out: Annotated[
            Path | None,
            typer.Option(help="Save the files the runs write into out/ to this folder."),
        ] = None,
    ) -> None:
        """Solve TASK with the crew; exit 0 when solved, 1 when not, 2 on a usage error."""
        settings = load_crew_settings(
            {
                "model": model,
                "base_url": base_url,
                "mode": mode,
                "max_rounds": max_rounds,
                "token_budget": max_tokens,
                "time_budget": timeout,
                "role_models": _role_models(admin_model, coder_model, reviewer_model),
                "sandbox": sandbox_overrides(timeout=run_timeout, memory=memory, image=image),
            },
            config_path=config,
        )
        settings.api_key_value()  # fail before any work when no model is configured
        files = load_input_files(
            files_from_paths(file or []),
            max_count=settings.sandbox.max_input_files,
            max_bytes=settings.sandbox.max_input_bytes,
        )
        console = Console()
        stream_chat = not (quiet or as_json)
        with _open_transcript(transcript) as recorder:

            async def on_message(message: Message) -> None:
                recorder.message(message)
                if stream_chat:
                    console.print(_render(message))

            result = asyncio.run(
                solve_task(
                    task,
                    settings,
                    on_message=on_message,
                    files=files,
                    output_files=out is not None,
                )
            )
            if out is not None:
                # Runs save in order: a later run's file replaces an earlier one of that name.
                result.runs[:] = [save_artifacts(run, out) for run in result.runs]
            recorder.result(result)
        if as_json:
            typer.echo(json.dumps(result_summary(result), indent=2))
        else:
            _print_outcome(console, result, quiet=quiet)
            if not quiet:
                saved = [artifact for run in result.runs for artifact in run.artifacts]
                for line in artifact_lines(saved):
                    console.print(escape(line), style="dim", soft_wrap=True, highlight=False)
        if not result.solved:
            raise typer.Exit(NOT_SOLVED_EXIT)


def result_summary(result: CrewResult) -> dict[str, Any]:
    """The ``--json`` document: answer, stop reason, rounds, tokens and runs."""
    return {
        "task": result.task,
        "solved": result.solved,
        "answer": result.answer,
        "stop_reason": result.stop_reason.value,
        "stop_detail": result.stop_detail,
        "rounds": result.rounds,
        "total_tokens": result.total_tokens,
        "duration": round(result.duration, 3),
        "runs": [_run_summary(run) for run in result.runs],
        "error": None if result.error is None else str(result.error),
        "notes": result.notes,
    }


def _run_summary(run: ExecutionResult) -> dict[str, Any]:
    return run.model_dump(
        mode="json",
        include={
            "run_id",
            "language",
            "exit_code",
            "timed_out",
            "oom_killed",
            "duration",
            "image",
            "stdout",
            "stderr",
            "artifacts",
            "artifacts_truncated",
            "artifacts_skipped",
        },
    )


def _role_models(admin: str | None, coder: str | None, reviewer: str | None) -> dict[str, str]:
    chosen = {"admin": admin, "coder": coder, "reviewer": reviewer}
    return {role: name for role, name in chosen.items() if name}


def _render(message: Message) -> RenderableType:
    if isinstance(message.data, ExecutionResult):
        # Program output is shown verbatim, not as Markdown.
        style = "green" if message.data.ok else "red"
        return Panel(
            Text(message.content),
            title=f"[bold]Message from {message.sender}[/bold]",
            title_align="left",
            border_style=style,
        )
    return render_message(message)


def _print_outcome(console: Console, result: CrewResult, *, quiet: bool) -> None:
    if result.solved:
        if quiet:
            typer.echo(result.answer or "")
        else:
            console.print(f"[bold green]answer:[/] {escape(result.answer or '')}", highlight=False)
        return
    err = Console(stderr=True, highlight=False)
    reason = result.stop_reason.value
    err.print(f"[bold red]not solved[/] ({reason}): {escape(result.stop_detail)}")


class _TranscriptRecorder:
    """Appends one JSON object per line: every message, then the final result."""

    def __init__(self, file: IO[str] | None) -> None:
        self._file = file
        self._started = time.monotonic()

    def _write(self, record: dict[str, Any]) -> None:
        if self._file is None:
            return
        record["elapsed"] = round(time.monotonic() - self._started, 4)
        self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._file.flush()

    def message(self, message: Message) -> None:
        record = {"event": "message", **message.model_dump(mode="json")}
        if isinstance(message.data, ExecutionResult):
            record["event"] = "run"
        self._write(record)

    def result(self, result: CrewResult) -> None:
        if isinstance(result.error, FunctionCallRequiredError):
            # The calls a model got wrong never reach the chat; keep them for the post-mortem.
            for number, attempt in enumerate(result.error.attempts, start=1):
                self._write(
                    {
                        "event": "tool_call_attempt",
                        "attempt": number,
                        "reply": attempt.reply.model_dump(mode="json"),
                        "errors": attempt.errors,
                    }
                )
        self._write({"event": "result", **result_summary(result)})


@contextlib.contextmanager
def _open_transcript(path: Path | None) -> Iterator[_TranscriptRecorder]:
    if path is None:
        yield _TranscriptRecorder(None)
        return
    try:
        file = path.open("w", encoding="utf-8")
    except OSError as error:
        raise UserError(f"cannot write the transcript to {path}: {error}") from None
    with file:
        yield _TranscriptRecorder(file)
