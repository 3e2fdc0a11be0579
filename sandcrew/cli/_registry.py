"""Which commands make up the CLI (one line each), each imported only when it is used.

A command's module brings what it needs (the model client, the crew, Docker's SDK);
importing every one of them for each call would make ``sandcrew version`` pay for them
all. ``sandcrew --help`` lists the commands from the summaries here, which equal the
commands' own first help lines (a test holds them together).
"""

from __future__ import annotations

import gc
import importlib
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

import typer
import typer.main
from typer import BadParameter
from typer.core import TyperCommand, TyperGroup

# click's own classes are typer's private business: what passes through here is typed Any.
Command = Any
Context = Any


class _Problems(BadParameter):
    """Every parameter that could not be read, in one line."""

    def format_message(self) -> str:
        return self.message


@dataclass(frozen=True)
class CommandEntry:
    """One command of ``sandcrew``: where it lives and what ``sandcrew --help`` says of it."""

    name: str
    module: str
    attribute: str
    """A command function, or a ``typer.Typer`` holding a group of subcommands."""
    summary: str


COMMANDS = (
    CommandEntry("solve", "sandcrew.cli.solve", "solve", "Solve TASK with the crew."),
    CommandEntry(
        "run",
        "sandcrew.cli.run",
        "run",
        "Run FILE (or stdin) in a new hardened container, showing its output as it comes.",
    ),
    CommandEntry(
        "repl",
        "sandcrew.cli.repl",
        "repl",
        "An interactive interpreter in a hardened container, kept until you leave it.",
    ),
    CommandEntry(
        "transcript",
        "sandcrew.cli.transcript",
        "transcript",
        "Render a solve transcript as a self-contained HTML page.",
    ),
    CommandEntry(
        "doctor",
        "sandcrew.cli.doctor",
        "doctor",
        "Check Python, the settings, the model endpoint, Docker, runtimes, images and the "
        "sandbox's security in a real container.",
    ),
    CommandEntry(
        "mcp",
        "sandcrew.cli.mcp_server",
        "mcp",
        "Serve run_code, list_languages, the session tools (and solve, with a model) over MCP.",
    ),
    CommandEntry(
        "e2b",
        "sandcrew.cli.e2b_server",
        "e2b",
        "Serve E2B's sandbox API, so that the unmodified E2B SDK runs on sandcrew's sandboxes.",
    ),
    CommandEntry(
        "version", "sandcrew.cli.version", "version", "Print the installed sandcrew version."
    ),
    CommandEntry(
        "suite",
        "sandcrew.cli.suite",
        "suite_app",
        "Run regression suites of coding tasks in throwaway containers.",
    ),
    CommandEntry(
        "images", "sandcrew.cli.images", "images_app", "Build and list the sandbox images."
    ),
    CommandEntry("sandbox", "sandcrew.cli.sandbox", "sandbox_app", "Manage sandbox containers."),
    CommandEntry(
        "warm",
        "sandcrew.cli.warm",
        "warm_app",
        "Keep a warm process that starts sandcrew's commands without importing anything.",
    ),
)


class _Command(TyperCommand):
    """A command whose options that cannot be read are all named in one error (click stops
    at the first)."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        given = list(args)
        try:
            return super().parse_args(ctx, args)
        except BadParameter as first:
            raise _every_bad_parameter(self, ctx, given, first) from None


def _every_bad_parameter(
    command: TyperCommand, ctx: Context, args: list[str], first: BadParameter
) -> BadParameter:
    """``first`` and the problem of every other parameter that cannot be read from ``args``."""
    try:
        values, _, _ = command.make_parser(ctx).parse_args(args=list(args))
    except Exception:  # a usage error of its own (an unknown option): the first says enough
        return first
    problems = [first.format_message().rstrip(".")]
    for parameter in command.get_params(ctx):
        if parameter is first.param or parameter.is_eager:
            continue
        scratch = type(ctx)(command, parent=ctx.parent, info_name=ctx.info_name)
        try:
            parameter.handle_parse_result(scratch, values, [])
        except BadParameter as other:
            problems.append(other.format_message().rstrip("."))
        except Exception:  # not this parameter's value (another usage error): left out
            continue
    if len(problems) == 1:
        return first
    return _Problems("; ".join(problems), ctx)


def load_command(entry: CommandEntry) -> Command:
    """Import ``entry``'s module and build its command as ``app.command()`` would."""
    target = getattr(importlib.import_module(entry.module), entry.attribute)
    holder = typer.Typer(rich_markup_mode=None, add_completion=False)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=entry.name)
    else:
        holder.command(entry.name, cls=_Command)(target)
    command = typer.main.get_group(holder).commands[entry.name]
    _as_ours(command)
    if not gc.isenabled():
        # main() paused the collector for the start-up: what exists now lives as long as
        # the process (and the few cycles of start-up garbage with it), so it is frozen,
        # never scanned again, not even at exit, and collection resumes for the command.
        gc.freeze()
        gc.enable()
    return command


def _as_ours(command: Command) -> None:
    """The subcommands of a group (``suite run``, ``images build``) are typer's own class:
    they become :class:`_Command` too, whose instances have the same fields."""
    if isinstance(command, TyperGroup):
        for subcommand in command.commands.values():
            _as_ours(subcommand)
    elif type(command) is TyperCommand:
        command.__class__ = _Command


class _CommandsOnDemand(MutableMapping[str, "Command"]):
    """Every command's name; a command itself is built the first time it is looked up."""

    def __init__(self, entries: tuple[CommandEntry, ...]) -> None:
        self._entries = {entry.name: entry for entry in entries}
        self._loaded: dict[str, Command] = {}

    def __getitem__(self, name: str) -> Command:
        if name not in self._loaded:
            self._loaded[name] = load_command(self._entries[name])
        return self._loaded[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self._entries.pop(name, None)
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter({**self._entries, **self._loaded})

    def __len__(self) -> int:
        return len({**self._entries, **self._loaded})


class CommandGroup(TyperGroup):
    """The ``sandcrew`` group: commands listed by name, imported on dispatch."""

    def __init__(self, **attributes: Any) -> None:
        super().__init__(**attributes)
        self.commands = _CommandsOnDemand(COMMANDS)

    def list_commands(self, ctx: Context) -> list[str]:
        return list(self.commands)

    def format_commands(self, ctx: Context, formatter: Any) -> None:
        # From the summaries: listing the commands must not import them.
        limit = formatter.width - 6 - max(len(entry.name) for entry in COMMANDS)
        rows = [
            (entry.name, TyperCommand(entry.name, help=entry.summary).get_short_help_str(limit))
            for entry in COMMANDS
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)
