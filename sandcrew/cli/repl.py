"""`sandcrew repl`: an interactive interpreter in a hardened container (a session).

Input is read with the standard library's ``readline`` on a terminal (line editing, and
history for the length of the REPL). A cell is sent once it is complete: Python's as its
compiler says (a block ends with an empty line, as in ``python``), bash's and
JavaScript's when brackets and quotes are closed and the line does not end with a
backslash. Output is shown as it comes, through the terminal-safety filter; images are
saved into a folder and named. Ctrl-C while a cell runs interrupts it (the session's
state is kept); at the prompt it drops the line. Ctrl-D (end of input) closes the
session and removes its container; so does SIGTERM.
"""

from __future__ import annotations

import asyncio
import codeop
import contextlib
import signal
import sys
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from sandcrew.cli import _options as options, _output
from sandcrew.cli._exit_codes import ExitCode
from sandcrew.cli._files import files_from_paths
from sandcrew.cli._output import is_terminal
from sandcrew.cli._terminal import UntrustedWriter, reset_attributes
from sandcrew.errors import UserError
from sandcrew.sandbox import (
    Artifact,
    CellResult,
    DisplayOutput,
    DockerSandbox,
    OutputEvent,
    SandboxWithSessions,
    Session,
    SessionClosedError,
    SessionLimits,
)
from sandcrew.sandbox._lazy_session import LazySession

IMAGE_SUFFIXES = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/svg+xml": ".svg",
}
"""Display outputs saved as files, by MIME type."""

_PROMPTS = {
    "python": ("In [{count}]: ", "   ...: "),
    "bash": ("bash [{count}]$ ", "> "),
    "javascript": ("js [{count}]> ", "... "),
}
_CLOSERS = {"(": ")", "[": "]", "{": "}"}


def repl(
    language: Annotated[
        options.Language,
        typer.Option("--language", "-l", help="The interpreter: python, bash or javascript."),
    ] = options.Language.PYTHON,
    image: Annotated[
        str | None, typer.Option(help="Use this image instead of the language's default one.")
    ] = None,
    file: options.InputFiles = None,
    images: Annotated[
        Path,
        typer.Option(help="Folder where images the cells display are saved."),
    ] = Path("repl-images"),
    timeout: Annotated[
        float | None,
        typer.Option(
            min=0.001,
            help="Seconds a cell may run before it is interrupted.",
            show_default=f"{SessionLimits.model_fields['cell_timeout'].default:g}",
        ),
    ] = None,
    memory: options.Memory = None,
    network: options.Network = False,
    allow_host: options.AllowHost = None,
    secret_header: options.SecretHeader = None,
    config: options.Config = None,
) -> None:
    """An interactive interpreter in a hardened container, kept until you leave it.

    Variables, imports and files persist from one cell to the next. Ctrl-C interrupts a
    running cell and keeps the session; Ctrl-D leaves and removes the container.
    """
    settings = options.settings_from_options(
        config=config,
        sandbox=options.sandbox_flags(
            memory=memory,
            image=image,
            language=language.value,
            network=network,
            allow_hosts=allow_host,
            secret_headers=secret_header,
        ),
        sessions={"cell_timeout": timeout},
    )
    inputs = files_from_paths(file or [])
    limits = settings.sessions
    interactive = is_terminal(sys.stdin)
    if interactive:
        import readline  # noqa: F401  (line editing and history for input())
    code = run_repl(
        DockerSandbox(settings.sandbox),
        language.value,
        limits=limits,
        inputs=inputs,
        images=images,
        interactive=interactive,
    )
    raise typer.Exit(code)


def run_repl(
    sandbox: SandboxWithSessions,
    language: str,
    *,
    limits: SessionLimits,
    inputs: Mapping[str, Path],
    images: Path,
    interactive: bool,
) -> int:
    """Cells read from stdin run in one session of ``sandbox`` until the input ends; the
    exit code (0 at the end of input, 1 when the session ended first)."""
    with asyncio.Runner() as runner, _TerminateAsExit():
        held = LazySession(sandbox, language, limits=limits)
        try:
            _status(f"starting a {language} session…")
            session = runner.run(_start(held, inputs))
            return _loop(runner, session, images, interactive=interactive)
        finally:
            runner.run(held.aclose())


async def _start(held: LazySession, inputs: Mapping[str, Path]) -> Session:
    session = await held.open()
    for name, path in inputs.items():
        await session.put_file(name, path)
    return session


def _loop(runner: asyncio.Runner, session: Session, images: Path, *, interactive: bool) -> int:
    limits = session.limits
    _status(
        f"{session.language} in {session.image} · cells up to {limits.cell_timeout:g}s · "
        f"closed after {limits.idle_timeout:g}s idle · Ctrl-C interrupts a cell, Ctrl-D leaves"
    )
    tag = time.strftime("%Y%m%d-%H%M%S")
    count = 1
    while True:
        try:
            code = read_cell(session.language, count, interactive=interactive)
        except KeyboardInterrupt:
            print("\nKeyboardInterrupt", file=sys.stderr)
            continue
        if code is None:
            return ExitCode.OK
        if not code.strip():
            continue
        try:
            with _typed_ahead_not_echoed(interactive):
                result = runner.run(_run_cell(session, code))
        except SessionClosedError as closed:
            _status(str(closed), style="red")
            return ExitCode.SESSION_ENDED
        _show(result, count, images, tag)
        count = (result.execution_count or count) + 1


def read_cell(language: str, count: int, *, interactive: bool) -> str | None:
    """One complete cell from stdin; ``None`` at the end of input."""
    first, more = _PROMPTS[language]
    lines: list[str] = []
    while True:
        prompt = (first.format(count=count) if not lines else more) if interactive else ""
        try:
            lines.append(input(prompt))
        except EOFError:
            if interactive:
                print(file=sys.stderr)
            return "\n".join(lines) if lines else None
        text = "\n".join(lines)
        if cell_is_complete(language, text):
            return text


def cell_is_complete(language: str, text: str) -> bool:
    """Whether ``text`` is a whole cell, or more lines are to come."""
    if not text.strip():
        return True
    if language == "python":
        if "\n" in text and not text.rsplit("\n", 1)[1].strip():
            return True  # an empty line ends a block
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return codeop.compile_command(text, "<cell>", "single") is not None
        except (SyntaxError, ValueError, OverflowError):
            return True  # IPython syntax (%magic, !cmd) or an error the interpreter reports
    return _brackets_closed(text) and not text.endswith("\\")


def _brackets_closed(text: str) -> bool:
    expected: list[str] = []
    quote: str | None = None
    escaped = False
    for character in text:
        if escaped:
            escaped = False
        elif character == "\\":
            escaped = True
        elif quote is not None:
            if character == quote:
                quote = None
        elif character in "'\"`":
            quote = character
        elif character in _CLOSERS:
            expected.append(_CLOSERS[character])
        elif expected and character == expected[-1]:
            expected.pop()
    return quote is None and not expected


async def _run_cell(session: Session, code: str) -> CellResult:
    """Run a cell, its output shown as it comes; Ctrl-C interrupts it, SIGTERM ends the REPL."""
    loop = asyncio.get_running_loop()
    cell = asyncio.current_task()
    assert cell is not None
    interrupts: set[asyncio.Task[None]] = set()
    terminated = False

    def interrupt() -> None:
        print("\n[interrupting the cell]", file=sys.stderr, flush=True)
        sent = loop.create_task(session.interrupt())
        interrupts.add(sent)
        sent.add_done_callback(interrupts.discard)

    def terminate() -> None:
        nonlocal terminated
        terminated = True
        cell.cancel()

    writers = {"stdout": UntrustedWriter(sys.stdout), "stderr": UntrustedWriter(sys.stderr)}

    def show(event: OutputEvent) -> None:
        writers[event.stream].write(event.text)

    loop.add_signal_handler(signal.SIGINT, interrupt)
    loop.add_signal_handler(signal.SIGTERM, terminate)
    try:
        return await session.run(code, on_output=show)
    except asyncio.CancelledError:
        if terminated:
            raise SystemExit(ExitCode.INTERRUPTED) from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        loop.remove_signal_handler(signal.SIGTERM)
        _TerminateAsExit.install()
        for writer in writers.values():
            writer.end()


def _show(result: CellResult, count: int, images: Path, tag: str) -> None:
    """What the cell displayed, its error and what the session reports, after its output."""
    out = UntrustedWriter(sys.stdout)
    for number, output in enumerate(result.outputs, start=1):
        saved = _save_images(output, images, f"{tag}-cell{count}-{number}")
        for path in saved:
            _status(f"[image saved to {path}]")
        text = output.data.get("text/plain")
        if isinstance(text, str) and not saved:
            prefix = f"Out[{result.execution_count or count}]: " if output.kind == "result" else ""
            out.write(prefix + text + "\n")
        elif not saved:
            kinds = ", ".join(output.data)
            _status(f"[{kinds} output not shown in a terminal]")
    out.end()
    if result.error is not None:
        error = UntrustedWriter(sys.stderr)
        shown = result.error.traceback or f"{result.error.name}: {result.error.value}"
        # The REPL's display of the error: its own line, piped too, before any note of ours.
        error.write(shown if shown.endswith("\n") else shown + "\n")
        error.end()
    if result.timed_out:
        _status(f"[the cell reached its limit of {result.duration:.0f}s]", style="yellow")
    if result.state_lost:
        _status(
            f"[the interpreter was restarted ({result.reason or 'it ended'}): "
            "variables are gone, files kept]",
            style="yellow",
        )


@contextlib.contextmanager
def _typed_ahead_not_echoed(interactive: bool) -> Iterator[None]:
    """While a cell runs, the terminal does not echo what is typed: the prompt's line editor
    shows it once the cell is done (echoed now too, it showed twice). Ctrl-C still works."""
    if not interactive:
        yield
        return
    import termios

    descriptor = sys.stdin.fileno()
    try:
        before = termios.tcgetattr(descriptor)
    except termios.error:
        yield
        return
    quiet = [*before]
    quiet[3] &= ~termios.ECHO
    termios.tcsetattr(descriptor, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        with contextlib.suppress(termios.error):
            termios.tcsetattr(descriptor, termios.TCSANOW, before)


def _save_images(output: DisplayOutput, folder: Path, stem: str) -> list[Path]:
    """Each image as a new file (the rules of ``--out``: no link followed, nothing replaced)."""
    saved = []
    for media_type, suffix in IMAGE_SUFFIXES.items():
        data = output.data.get(media_type)
        if data is None:
            continue
        content = data if isinstance(data, bytes) else data.encode()
        image = Artifact(name=stem + suffix, size=len(content), media_type=media_type, data=content)
        try:
            image.save(folder)
        except UserError as refusal:
            _status(f"[image not saved: {refusal}]", style="yellow")
            continue
        saved.append(folder / image.name)
    return saved


def _status(text: str, *, style: str = "dim") -> None:
    from rich.markup import escape

    reset_attributes(sys.stderr)
    _output.console(stderr=True, highlight=False).print(escape(text), style=style, soft_wrap=True)


class _TerminateAsExit:
    """SIGTERM ends the REPL as Ctrl-D does (the session closed, the container removed)."""

    @staticmethod
    def _exit(number: int, frame: FrameType | None) -> None:
        raise SystemExit(ExitCode.INTERRUPTED)

    @classmethod
    def install(cls) -> None:
        with contextlib.suppress(ValueError):  # not the main thread
            signal.signal(signal.SIGTERM, cls._exit)

    def __enter__(self) -> None:
        self._before = signal.getsignal(signal.SIGTERM)
        self.install()

    def __exit__(self, *exc_info: object) -> None:
        with contextlib.suppress(ValueError, TypeError):
            signal.signal(signal.SIGTERM, self._before)
