"""`sandcrew solve --session`: the coder's blocks run as cells of one session, so a later
block uses what an earlier one defined; without it each run starts from nothing."""

from __future__ import annotations

import json

import pytest

from sandcrew.crew import SessionSandbox
from sandcrew.sandbox import DockerSandbox, OutputEvent, SandboxConfig
from sandcrew.testing import ScriptedModelServer, Turn
from tests.crew.conftest import coder_turn, review_turn, run_cli

pytestmark = pytest.mark.docker

TASK = "Compute 42 in two steps."


FIRST_STEPS = [
    coder_turn("```python\nbase = 20\nprint(base)\n```"),
    review_turn(),
    Turn(agent="admin", contains="[RUNNER_RESULT]", content="Now add 22 to base and print it."),
    coder_turn("```python\nprint(base + 22)\n```"),
    review_turn(),
]
ANSWER = Turn(agent="admin", contains="[RUNNER_RESULT]", content="The answer is 42.\n[COMPLETE]")


def solve(server: ScriptedModelServer, *extra: str) -> list[dict[str, object]]:
    completed = run_cli(
        "solve", TASK, "--base-url", server.base_url, "--model", "scripted", "--json", *extra
    )
    runs: list[dict[str, object]] = json.loads(completed.stdout)["runs"]
    return runs


def test_a_later_block_builds_on_an_earlier_cell(
    scripted_model_server: ScriptedModelServer,
) -> None:
    scripted_model_server.add(*FIRST_STEPS, ANSWER)
    runs = solve(scripted_model_server, "--session")

    assert [(run["exit_code"], run["stdout"]) for run in runs] == [(0, "20\n"), (0, "42\n")]
    assert runs[0]["run_id"] == runs[1]["run_id"]  # one session's container


def test_without_it_each_run_starts_from_nothing(
    scripted_model_server: ScriptedModelServer,
) -> None:
    # The second run fails, so the coder is asked again and writes it whole.
    scripted_model_server.add(
        *FIRST_STEPS, coder_turn("```python\nprint(20 + 22)\n```"), review_turn(), ANSWER
    )
    runs = solve(scripted_model_server)

    assert runs[0]["stdout"] == "20\n"
    assert runs[1]["exit_code"] == 1
    assert "NameError" in str(runs[1]["stderr"])
    assert runs[2]["stdout"] == "42\n"
    assert len({run["run_id"] for run in runs}) == 3


def test_session_and_out_are_refused_together() -> None:
    completed = run_cli("solve", TASK, "--model", "scripted", "--session", "--out", "results")
    assert completed.returncode == 2
    assert "--out" in completed.stderr
    assert "--session" in completed.stderr


async def test_a_block_that_kills_its_interpreter_is_a_failed_run_and_the_chat_goes_on(
    docker_client: object,
) -> None:
    chat = SessionSandbox(DockerSandbox(SandboxConfig(timeout=20)))
    try:
        kept = await chat.run("value = 'before'")
        killed = await chat.run("import os\nprint('bye', flush=True)\nos._exit(0)")
        after = await chat.run("print(1 + 1)")
        shell = await chat.run("echo from a container of its own", "bash")
    finally:
        await chat.aclose()

    assert kept.exit_code == 0
    assert killed.exit_code == 1  # its own "exit 0" is not the verdict: the state was lost
    assert "the interpreter was restarted" in killed.stderr
    assert (after.exit_code, after.stdout) == (0, "2\n")
    assert shell.stdout == "from a container of its own\n"
    assert shell.run_id != after.run_id


async def test_output_of_cells_and_of_other_languages_is_told_as_it_comes(
    docker_client: object,
) -> None:
    told: list[tuple[str, str]] = []

    async def on_output(event: OutputEvent) -> None:
        told.append((event.stream, event.text))

    chat = SessionSandbox(DockerSandbox(SandboxConfig(timeout=20)))
    try:
        cell = await chat.run(
            "import sys\nprint('cell')\nprint('oops', file=sys.stderr)", on_output=on_output
        )
        shell = await chat.run("echo shell", "bash", on_output=on_output)
    finally:
        await chat.aclose()

    assert (cell.stdout, shell.stdout) == ("cell\n", "shell\n")
    assert sorted(told) == [("stderr", "oops\n"), ("stdout", "cell\n"), ("stdout", "shell\n")]
