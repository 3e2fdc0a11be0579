"""The examples of the README and of every page in docs/ run as written.

Every Python example compiles and every `sandcrew` command line parses with the real
command line's options; the examples that need only Docker and a model server run, with
the scripted server on loopback standing in for the model.
"""

from __future__ import annotations

import ast
import os
import re
import select
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer._click.exceptions import UsageError
from typer.core import TyperCommand, TyperGroup

from sandcrew.cli import app
from sandcrew.cli._errors import _usage_error
from sandcrew.testing import ScriptedModelServer
from tests.crew.conftest import FIBONACCI_ANSWER, happy_path_turns

REPOSITORY = Path(__file__).parent.parent
README = REPOSITORY / "README.md"
PAGES = [README, *sorted((REPOSITORY / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(language: str) -> list[tuple[str, str]]:
    """(page:line, text) of every fenced block of ``language`` on every page."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if match.group(1) == language:
                line = text.count("\n", 0, match.start()) + 1
                found.append((f"{page.relative_to(REPOSITORY)}:{line}", match.group(2)))
    return found


def block_after(page: Path, marker: str, language: str = "python") -> str:
    text = page.read_text(encoding="utf-8")
    start = text.index(marker)
    match = re.search(rf"```{language}\n(.*?)```", text[start:], re.DOTALL)
    assert match is not None, f"no {language} block after {marker!r} in {page.name}"
    return match.group(1)


def section_blocks(
    page: str, heading: str, language: str = "python", *, naming: str = ""
) -> list[str]:
    """The ``language`` blocks under the ``## heading`` of docs/``page`` that contain
    ``naming``, in order."""
    text = (REPOSITORY / "docs" / page).read_text(encoding="utf-8")
    section = text[text.index(f"\n## {heading}\n") :]
    following = section.find("\n## ", 1)
    section = section if following < 0 else section[:following]
    return [
        match.group(2)
        for match in FENCE.finditer(section)
        if match.group(1) == language and naming in match.group(2)
    ]


def run_python(code: str, *, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False,
        cwd=cwd,
    )  # fmt: skip


def output_of(code: str) -> str:
    """What ``code`` prints, run as a program of its own; it must succeed."""
    completed = run_python(code)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


PYTHON_EXAMPLES = blocks("python")


@pytest.mark.parametrize(
    "code", [code for _, code in PYTHON_EXAMPLES], ids=[where for where, _ in PYTHON_EXAMPLES]
)
def test_every_python_example_compiles(code: str) -> None:
    # Top-level `async with` is allowed: an example may show the body of a coroutine.
    compile(code, "<example>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def sandcrew_command_lines() -> list[tuple[str, list[str], str | None]]:
    """Every `sandcrew ...` command of every bash block, as the shell would split it, and the
    error line the page says it ends with when the next line is a ``# error: ...`` comment."""
    found = []
    for where, script in blocks("bash"):
        lines = script.replace("\\\n", " ").splitlines()
        for number, line in enumerate(lines):
            said = lines[number + 1] if number + 1 < len(lines) else ""
            documented = said.removeprefix("# ") if said.startswith("# error: ") else None
            if "<<" in line and "<<<" not in line:
                line = line[: line.index("<<")]  # a here-document's body is not a command
            for command in re.split(r"&&|\|\||;|\|", line):
                words = shlex.split(command, comments=True)
                while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
                    words.pop(0)  # VARIABLE=value before the command
                if words and words[0].endswith("sandcrew"):
                    arguments = words[1:]
                    if "<<<" in arguments:
                        arguments = arguments[: arguments.index("<<<")]
                    found.append((where, arguments, documented))
    return found


COMMAND_LINES = sandcrew_command_lines()


@pytest.mark.parametrize(
    ("arguments", "documented_error"),
    [(arguments, documented) for _, arguments, documented in COMMAND_LINES],
    ids=[f"{where} sandcrew {' '.join(arguments)}"[:90] for where, arguments, _ in COMMAND_LINES],
)
def test_every_command_line_parses(arguments: list[str], documented_error: str | None) -> None:
    refused = _refusal(arguments)
    # A page may show a refused command line: then with the error it really ends with (an
    # error of the settings comes after the parse, when the command runs).
    if refused is not None:
        assert f"error: {_usage_error(refused)}" == documented_error


def _refusal(arguments: list[str]) -> UsageError | None:
    """Parse ``arguments`` down to the command that runs (typer's groups carry their own copy
    of click's classes); the usage error, if the command line is refused."""
    group: TyperCommand = typer.main.get_command(app)
    try:
        context = group.make_context("sandcrew", list(arguments), resilient_parsing=False)
        while isinstance(group, TyperGroup):
            name, *rest = [*context._protected_args, *context.args]
            command = group.get_command(context, name)
            assert command is not None, f"no command {name!r}"
            group, context = command, command.make_context(name, rest, parent=context)
    except UsageError as error:
        return error
    return None


def test_the_pages_have_examples_to_check() -> None:
    assert len(PYTHON_EXAMPLES) >= 8
    assert len(COMMAND_LINES) >= 15


@pytest.mark.docker
def test_solve_against_the_scripted_server_runs_as_the_docs_say() -> None:
    serve, solve = block_after(
        REPOSITORY / "docs" / "models.md", "**`sandcrew solve` against it**", "bash"
    ).splitlines()
    # The documented port may be taken here: the server picks one and names it.
    command = shlex.split(serve, comments=True)
    assert command[:3] == ["python", "-m", "sandcrew.testing"]
    server = subprocess.Popen(
        [sys.executable, *command[1:-1], "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert server.stdout is not None
    assert server.stderr is not None
    try:
        ready, _, _ = select.select([server.stdout], [], [], 60)
        said = server.stdout.readline() if ready else ""
        url = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", said)
        assert url is not None, said
        completed = subprocess.run(
            ["bash", "-euc", solve.replace("http://127.0.0.1:8765/v1", url.group(1))],
            capture_output=True, text=True, timeout=300, check=False,
            env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
        )  # fmt: skip
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
        answered = server.stderr.read()
        server.stdout.close()
        server.stderr.close()
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert f"answer: The 39th Fibonacci number is {FIBONACCI_ANSWER}." in completed.stdout
    assert answered.startswith("answered "), answered
    assert "not in the script" not in answered, answered


def test_two_agent_chat_example_runs() -> None:
    code = block_after(REPOSITORY / "docs" / "models.md", "A two-agent chat against it")
    assert output_of(code).splitlines() == [
        "student: What is 2 + 2?",
        "teacher: 2 + 2 is 4.",
        "student: Thanks!",
    ]


@pytest.mark.docker
def test_files_and_plots_example_runs(tmp_path: Path) -> None:
    # The image build line is CI's business (.ci/run builds python-data); the rest runs as is.
    example = block_after(REPOSITORY / "docs" / "sessions.md", "## Files and plots", "bash")
    script = "\n".join(
        line for line in example.splitlines() if not line.startswith("sandcrew images")
    )
    completed = subprocess.run(
        ["bash", "-euc", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["mean", "14.0", "max", "24.0"]
    assert (tmp_path / "results" / "figure-1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "saved to results/figure-1.png" in completed.stderr


def quick_start_lines() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Quick start") :]
    match = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert match is not None
    return match.group(1).splitlines()


@pytest.mark.docker
def test_quick_start_first_command_works_with_no_model() -> None:
    setup, first, needs_model, *_ = quick_start_lines()
    assert "sandcrew images build --install-deps" in setup
    assert "sandcrew solve" in needs_model  # the command that needs a model comes after
    # The test environment has no model configured (no key, a closed base URL).
    assert not os.environ.get("OPENAI_API_KEY")
    completed = subprocess.run(
        ["bash", "-euc", first],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    assert completed.returncode == 0, completed.stderr
    assert "14 tasks: 14 passed, 0 failed, 0 errors, 0 timeouts" in completed.stdout


@pytest.mark.docker
def test_the_sandbox_from_python_example_runs() -> None:
    completed = run_python(block_after(REPOSITORY / "docs" / "sessions.md", "## The sandbox"))
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("42\n 0 False [RUNNER_RESULT]\nexit code 0\n42")


def test_the_function_contract_example_runs() -> None:
    code = block_after(REPOSITORY / "docs" / "models.md", "## Function contracts")
    completed = run_python(code + "\nprint(review_code_block.call_json('{}').ok)\n")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "False\n"


def test_the_invalid_settings_example_prints_what_it_says() -> None:
    code = block_after(REPOSITORY / "docs" / "settings.md", "raise\n`sandcrew.errors")
    said = [line.removeprefix("# ") for line in code.splitlines() if line.startswith("# ")]
    completed = run_python(code)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == said


@pytest.mark.docker
def test_the_crew_from_python_example_runs_against_a_server() -> None:
    code = block_after(REPOSITORY / "docs" / "models.md", "## The crew from Python")
    with ScriptedModelServer(happy_path_turns()) as server:
        # The example's local server is the scripted one here; the rest runs as written.
        completed = run_python(code.replace("http://localhost:11434/v1", server.base_url))
    assert completed.returncode == 0, completed.stderr
    solved, *answer, stop_reason, rounds, tokens = completed.stdout.split()
    assert (solved, stop_reason, rounds) == ("True", "StopReason.TERMINATED", "4")
    assert FIBONACCI_ANSWER in " ".join(answer)
    assert int(tokens) > 0


def test_the_session_test_double_example_runs_without_docker() -> None:
    (example,) = section_blocks("sessions.md", "Testing session code without Docker")
    assert output_of(example) == "0 20 124 timed out after 5s\n"


@pytest.mark.docker
def test_live_output_examples_run(docker_client: object) -> None:
    streamed, called_back = section_blocks("sessions.md", "Live output")
    assert output_of(streamed) == "step 0\nstep 1\nstep 2\nexit 0\n"
    assert output_of(called_back) == "hello\n0\n"


@pytest.mark.docker
def test_the_mcp_http_client_example_runs_against_the_server() -> None:
    (client,) = section_blocks("mcp-and-frameworks.md", "MCP server", naming="streamable_http")
    server = subprocess.Popen(
        [sys.executable, "-m", "sandcrew", "mcp", "--transport", "streamable-http", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stderr is not None
    try:
        ready, _, _ = select.select([server.stderr], [], [], 60)
        listening = server.stderr.readline() if ready else ""
        assert listening.startswith("listening on http://127.0.0.1:"), listening
        # The example's server is this one, on the port it picked; the rest runs as written.
        completed = run_python(client.replace("http://127.0.0.1:8765/mcp", listening.split()[-1]))
    finally:
        server.terminate()
        server.wait(timeout=60)
        server.stderr.close()
    assert completed.returncode == 0, completed.stderr
    printed = ["False 42", "True /timeout: 999 is greater than the maximum of 10.0"]
    assert completed.stdout.splitlines() == printed
    assert all(f"# {line}" in client for line in printed)  # what the example says it prints


@pytest.mark.docker
def test_the_autogen_examples_run(docker_client: object) -> None:
    (stateless,) = section_blocks(
        "mcp-and-frameworks.md", "MCP server", naming="SandcrewCodeExecutor"
    )
    (stateful,) = section_blocks("mcp-and-frameworks.md", "AutoGen: a stateful executor")
    assert output_of(stateless) == "42\n"
    assert output_of(stateful) == "0 42\n"


@pytest.mark.docker
def test_the_ag2_examples_run(docker_client: object) -> None:
    (stateless,) = section_blocks(
        "mcp-and-frameworks.md", "MCP server", naming="SandcrewSandboxFactory"
    )
    (persistent,) = section_blocks("mcp-and-frameworks.md", "AG2: a persistent sandbox")
    assert output_of(stateless) == "0 42\n"
    assert output_of(persistent) == ""
