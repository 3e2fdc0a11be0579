"""`sandcrew doctor` proves tool calling with one named and one "auto" request."""

from __future__ import annotations

import pytest

from sandcrew.testing import ScriptedModelServer, ScriptedToolCall, Turn
from tests.process import run_cli

WIDE = {"COLUMNS": "2000"}
pytestmark = pytest.mark.docker

REJECTED = "tool_choice must be auto"
CALL = ScriptedToolCall(name="report_status", arguments={"ready": True})


def doctor(server: ScriptedModelServer) -> str:
    completed = run_cli(
        "doctor", "--no-self-test", "--base-url", server.base_url, "--model", "scripted",
        env=WIDE,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "Traceback" not in completed.stderr
    line = next(line for line in completed.stdout.splitlines() if "tool calling" in line)
    return line


def test_named_choice_works_and_auto_answers_text() -> None:
    # llama.cpp's chatml-function-calling: the named choice calls, "auto" mostly talks.
    with ScriptedModelServer(
        [
            Turn(agent="doctor", tool_choice="named", tool_calls=[CALL]),
            Turn(agent="doctor", tool_choice="auto", content="I am ready."),
        ]
    ) as server:
        line = doctor(server)
    assert "ok" in line
    assert "named tool_choice: yes; auto: no (answered text: 'I am ready.')" in line
    assert "the reviewer's call works" in line


def test_a_server_without_tools_gets_the_advice() -> None:
    without = "registry.ollama.ai/library/gemma2:2b does not support tools"
    with ScriptedModelServer([Turn(agent="doctor", status=400, error_message=without)]) as server:
        line = doctor(server)
    assert "warn" in line
    assert "named tool_choice: no (ToolsUnsupportedError" in line
    assert "the reviewer falls back to a plain-text review" in line
    # the second probe is not sent: the endpoint already said it takes no tools
    assert len(server.requests_for("doctor")) == 1


def test_a_server_rejecting_named_choices_is_adapted_to() -> None:
    with ScriptedModelServer(
        [
            Turn(agent="doctor", tool_choice="named", status=400, error_message="bad tool_choice"),
            Turn(
                agent="doctor", tool_choice="required", status=400, error_message="bad tool_choice"
            ),
            Turn(agent="doctor", tool_choice="auto", tool_calls=[CALL], times=2),
        ]
    ) as server:
        line = doctor(server)
    assert "named tool_choice: yes (the endpoint rejected tool_choice named" in line
    assert "auto: yes" in line
