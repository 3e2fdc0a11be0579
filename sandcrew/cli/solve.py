"""`sandcrew solve TASK`: the crew writes, reviews and runs code until the task is answered."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel
from rich.console import Console, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.status import Status
from rich.text import Text

from sandcrew.agents import Message, render_message
from sandcrew.cli import _options as options, _output
from sandcrew.cli._errors import Interrupted
from sandcrew.cli._exit_codes import ExitCode
from sandcrew.cli._files import check_out_folder, files_from_paths, save_run_files
from sandcrew.cli._preflight import check_before_solving
from sandcrew.cli._terminal import visible_controls, write_untrusted
from sandcrew.cli.run import artifact_lines
from sandcrew.core import counted
from sandcrew.crew import CrewResult, SessionSandbox, solve_task
from sandcrew.errors import InfrastructureError, UserError
from sandcrew.sandbox import DockerSandbox, ExecutionResult
from sandcrew.sandbox.files import load_input_files
from sandcrew.settings import AppSettings
from sandcrew.transcript import TranscriptWriter


def solve(
    task: Annotated[
        str,
        typer.Argument(metavar="TASK", help='The task, e.g. "What\'s the 39th fibonacci number?"'),
    ],
    model: options.Model = None,
    base_url: options.BaseUrl = None,
    admin_model: Annotated[str | None, typer.Option(help="Model for the admin.")] = None,
    coder_model: Annotated[str | None, typer.Option(help="Model for the coder.")] = None,
    reviewer_model: Annotated[str | None, typer.Option(help="Model for the reviewer.")] = None,
    mode: options.Mode = None,
    max_rounds: options.MaxRounds = None,
    token_budget: options.TokenBudget = None,
    time_budget: options.TimeBudget = None,
    request_timeout: options.RequestTimeout = None,
    model_retries: options.ModelRetries = None,
    image: options.Image = None,
    run_timeout: options.RunTimeout = None,
    memory: options.Memory = None,
    allow_host: options.AllowHost = None,
    secret_header: options.SecretHeader = None,
    config: options.Config = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the outcome as JSON instead of the chat.")
    ] = False,
    transcript: Annotated[
        Path | None,
        typer.Option(
            help="Write every message, tool call and run as JSON lines to FILE.", metavar="FILE"
        ),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print only the final answer.")
    ] = False,
    html: Annotated[
        Path | None,
        typer.Option(help="Write the chat as a self-contained HTML page.", metavar="FILE"),
    ] = None,
    file: options.InputFiles = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Save the files the runs write into out/ to this folder (into a new "
            "folder inside it when it is not empty; nothing is replaced)."
        ),
    ] = None,
    session: Annotated[
        bool,
        typer.Option(
            "--session",
            help="Run the coder's Python blocks as cells of one session kept for the whole "
            "chat, so a fix can build on earlier cells (default: a new container per run).",
        ),
    ] = False,
) -> None:
    """Solve TASK with the crew.

    Exit codes: 0 solved, 1 not solved, 2 usage or configuration error (no or unknown model,
    bad key or URL, missing image), 3 Docker or the model endpoint unreachable, 130 interrupted.
    """
    if not task.strip():
        raise UserError("the task is empty; say what the crew should solve")
    settings = options.settings_from_options(
        config=config,
        model=model,
        base_url=base_url,
        request_timeout=request_timeout,
        model_retries=model_retries,
        role_models={"admin": admin_model, "coder": coder_model, "reviewer": reviewer_model},
        mode=mode,
        max_rounds=max_rounds,
        token_budget=token_budget,
        time_budget=time_budget,
        sandbox=options.sandbox_flags(
            run_timeout=run_timeout,
            memory=memory,
            image=image,
            allow_hosts=allow_host,
            secret_headers=secret_header,
        ),
    )
    if html is not None and not html.parent.is_dir():
        raise UserError(f"--html {html}: the folder {html.parent} does not exist")
    if session and out is not None:
        raise UserError(
            "--out saves the files of throwaway runs; with --session the files stay in the "
            "session: leave out one of them"
        )
    check_before_solving(settings)
    check_out_folder(out)
    files = load_input_files(
        files_from_paths(file or []),
        max_count=settings.sandbox.max_input_files,
        max_bytes=settings.sandbox.max_input_bytes,
    )
    console = _output.console()
    stream_chat = not (quiet or as_json)
    # Piped, a --json run keeps stderr for its one JSON error object.
    show_waiting = not quiet and (not as_json or _output.is_terminal(sys.stderr))
    waiting = _WaitingLine(_output.console(stderr=True)) if show_waiting else None
    with _open_transcript(transcript, keep=html is not None) as writer:
        writer.header(task, settings)

        async def on_message(message: Message) -> None:
            writer.message(message)
            if stream_chat:
                console.print(_render(message))

        stopped: list[CrewResult] = []

        def on_stopped(so_far: CrewResult) -> None:
            stopped.append(so_far)
            writer.result(so_far)
            if as_json:
                print_result(so_far)

        try:
            result = asyncio.run(
                _solve(
                    task,
                    settings,
                    in_session=session,
                    on_message=on_message,
                    on_stopped=on_stopped,
                    files=files,
                    output_files=out is not None,
                    watcher=waiting,
                )
            )
        except KeyboardInterrupt:
            raise Interrupted(_what_was_stopped(stopped, transcript)) from None
        where = None
        if out is not None:
            # Runs save in order: a later run's file replaces an earlier one of that name.
            saved_runs, where = save_run_files(result.runs, out)
            result = result.model_copy(update={"runs": saved_runs})
        writer.result(result)
    if html is not None:
        from sandcrew.transcript_page import write_transcript_page

        written = {
            (number, artifact.name): artifact.data
            for number, run in enumerate(result.runs)
            for artifact in run.artifacts
        }
        write_transcript_page(writer.events, html, artifact_bytes=written)
    if as_json:
        print_result(result)
    else:
        _print_outcome(console, result, quiet=quiet)
        if not quiet:
            saved = [artifact for run in result.runs for artifact in run.artifacts]
            for line in artifact_lines(saved, saving=out is not None):
                console.print(escape(line), style="dim", soft_wrap=True, highlight=False)
            for note in [note for run in result.runs for note in run.artifacts_skipped]:
                console.print(f"left out: out/{escape(note)}", style="yellow", soft_wrap=True)
            if where is not None:
                console.print(escape(where), style="yellow", soft_wrap=True, highlight=False)
    raise typer.Exit(exit_code_for(result))


async def _solve(
    task: str, settings: AppSettings, *, in_session: bool, **options: Any
) -> CrewResult:
    """The crew's solve; with ``in_session``, on one session that ends with the chat."""
    if not in_session:
        return await solve_task(task, settings, **options)
    chat_sandbox = SessionSandbox(DockerSandbox(settings.sandbox), limits=settings.sessions)
    try:
        return await solve_task(task, settings, sandbox=chat_sandbox, **options)
    finally:
        await chat_sandbox.aclose()


def _what_was_stopped(stopped: list[CrewResult], transcript: Path | None) -> str:
    """The chat so far, in the line a Ctrl-C ends ``solve`` with (its containers are gone by
    then: the sandbox is closed before the interrupt reaches this)."""
    said = "the chat was stopped"
    if stopped:
        so_far = stopped[-1]
        tokens = f"{so_far.total_tokens:,} tokens" + (
            " (estimated)" if so_far.tokens_estimated else ""
        )
        runs = counted(len(so_far.runs), "run")
        said += f" after {counted(so_far.rounds, 'round')}, {runs} and {tokens}"
    said += "; no container of it is left"
    if transcript is not None:
        said += f"; {transcript} holds the chat so far"
    return said


def print_result(result: CrewResult) -> None:
    """The ``--json`` document: the outcome's own dump, every control character of a
    model's or a program's text escaped (C1 and DEL too), other text kept as it is."""
    typer.echo(_output.json_text(result.model_dump(mode="json"), indent=2))


def exit_code_for(result: CrewResult) -> ExitCode:
    """0 solved; a model that rejects our key or does not exist is a configuration error."""
    if result.solved:
        return ExitCode.OK
    if isinstance(result.exception, UserError):
        return ExitCode.USAGE
    if isinstance(result.exception, InfrastructureError) and result.exception.retryable:
        # Unreachable or failing after retries. A request the model refused (its context is
        # too small, say) is an answer: the task was not solved.
        return ExitCode.INFRASTRUCTURE
    return ExitCode.NOT_SOLVED


def _render(message: Message) -> RenderableType:
    message = _visible_text(message)
    if isinstance(message.data, ExecutionResult):
        # Program output is shown as it is (control characters made visible), not as Markdown.
        style = "green" if message.data.ok else "red"
        return Panel(
            Text(message.content),
            title=f"[bold]Message from {message.sender}[/bold]",
            title_align="left",
            border_style=style,
        )
    return render_message(message)


_Model = TypeVar("_Model", bound=BaseModel)


def _visible_text(model: _Model) -> _Model:
    """``model`` with the control characters of its texts made visible, for the terminal.

    Model replies and program output are untrusted. ``data`` (a run result, a
    verdict) is left alone: it is not what the panel shows.
    """
    updates: dict[str, Any] = {}
    for name in type(model).model_fields:
        value = getattr(model, name)
        if name == "data":
            continue
        if isinstance(value, str):
            updates[name] = visible_controls(value)
        elif isinstance(value, list):
            updates[name] = [
                _visible_text(item) if isinstance(item, BaseModel) else item for item in value
            ]
    return model.model_copy(update=updates)


def _print_outcome(console: Console, result: CrewResult, *, quiet: bool) -> None:
    answer = result.answer or ""
    if result.solved:
        if quiet:
            write_untrusted(sys.stdout, answer + "\n")
        else:
            console.print(
                f"[bold green]answer:[/] {escape(visible_controls(answer))}", highlight=False
            )
        return
    err = _output.console(stderr=True)
    reason = result.stop_reason.value
    detail = visible_controls(result.stop_detail)
    err.print(f"[bold red]not solved[/] ({reason}): {escape(detail)}")


class _WaitingLine:
    """Which agent the chat waits for while its model call is in flight, on stderr.

    On a terminal a status line that the reply clears; in a log (stderr not a terminal)
    one plain line per call. Never on stdout, so ``--json`` stays one JSON document.
    """

    def __init__(self, console: Console) -> None:
        self._console = console
        self._live = _output.is_terminal(sys.stderr)
        self._status: Status | None = None

    def call_started(self, agent: str, model: str) -> None:
        text = f"waiting for {agent} (model {visible_controls(model)})…"
        if not self._live:
            self._console.print(text, markup=False, highlight=False)
            return
        self._stop()
        self._status = self._console.status(Text(text))
        self._status.start()

    def call_ended(self, agent: str, model: str) -> None:
        self._stop()

    def _stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


@contextlib.contextmanager
def _open_transcript(path: Path | None, *, keep: bool) -> Iterator[TranscriptWriter]:
    if path is None:
        yield TranscriptWriter(None, keep=keep)
        return
    try:
        file = path.open("w", encoding="utf-8")
    except OSError as error:
        raise UserError(f"cannot write the transcript to {path}: {error}") from None
    with file:
        yield TranscriptWriter(file, keep=keep)
