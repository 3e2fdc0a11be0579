"""`sandcrew doctor` finds the chat form the endpoint needs and proves tool calling with one
named and one "auto" request."""

from __future__ import annotations

import pytest

from sandcrew.cli.doctor import CHAT_FORM_PROBE_SYSTEM
from sandcrew.testing import ScriptedModelServer, ScriptedToolCall, StrictTemplate, Turn
from tests.process import run_cli

WIDE = {"COLUMNS": "2000"}
pytestmark = pytest.mark.docker

REJECTED = "tool_choice must be auto"
CALL = ScriptedToolCall(name="report_status", arguments={"ready": True})


FORM_PROBE = Turn(agent="doctor", system=CHAT_FORM_PROBE_SYSTEM, content="Ready.")
"""The answer to the chat-form probe, which comes first."""


def doctor(server: ScriptedModelServer, check: str = "tool calling") -> str:
    completed = run_cli(
        "doctor", "--no-self-test", "--base-url", server.base_url, "--model", "scripted",
        env=WIDE,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "Traceback" not in completed.stderr
    line = next(line for line in completed.stdout.splitlines() if check in line)
    return line


@pytest.mark.parametrize(
    ("template", "shown"),
    [
        (None, "open: the endpoint accepts consecutive user turns"),
        (StrictTemplate(), "alternating: the endpoint refused the open form"),
        (StrictTemplate(system_role=False), "alternating-no-system: the endpoint refused"),
    ],
    ids=["open", "alternating", "no-system"],
)
def test_the_chat_form_the_endpoint_needs_is_shown(
    template: StrictTemplate | None, shown: str
) -> None:
    turns = [FORM_PROBE, Turn(agent="doctor", tools=True, tool_calls=[CALL], times=2)]
    with ScriptedModelServer(turns, strict_template=template) as server:
        line = doctor(server, "chat form")
    assert shown in line
    refused = [r for r in server.requests if r.template_objection is not None]
    assert len(refused) == (0 if template is None else 1)


def test_named_choice_works_and_auto_answers_text() -> None:
    # llama.cpp's chatml-function-calling: the named choice calls, "auto" mostly talks.
    with ScriptedModelServer(
        [
            FORM_PROBE,
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
    refusal = Turn(agent="doctor", tools=True, status=400, error_message=without)
    with ScriptedModelServer([FORM_PROBE, refusal]) as server:
        line = doctor(server)
    assert "warn" in line
    assert "named tool_choice: no (ToolsUnsupportedError" in line
    assert "the reviewer falls back to a plain-text review" in line
    # the second probe is not sent: the endpoint already said it takes no tools
    assert len([r for r in server.requests_for("doctor") if r.body.get("tools")]) == 1


def test_a_server_rejecting_named_choices_is_adapted_to() -> None:
    with ScriptedModelServer(
        [
            FORM_PROBE,
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
