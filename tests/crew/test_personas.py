"""The compatibility matrix: `sandcrew solve` through the real CLI against every persona.

Each persona of ``sandcrew.testing.PERSONAS`` replays one habit of real chat models. The crew
must solve the Fibonacci task for every persona it can rescue — with at most two model calls
over the compliant persona and one container run — and stop the others early (exit 1) with
a stop reason naming the cause, in at most three times the compliant persona's calls.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sandcrew.testing import (
    FIBONACCI_ANSWER,
    FIBONACCI_TASK,
    PERSONAS,
    Persona,
    ScriptedModelServer as Server,
    load_script,
)
from sandcrew.testing._personas import Mode
from tests.crew.conftest import run_cli

pytestmark = pytest.mark.docker

CASES = [
    pytest.param(persona, mode, id=f"{name}-{mode}")
    for name, persona in PERSONAS.items()
    for mode in persona.modes
]


def toml_text(settings: dict[str, Any]) -> str:
    """Top-level keys, then one table per nested mapping (values are JSON-compatible)."""
    lines = [
        f"{key} = {json.dumps(value)}"
        for key, value in settings.items()
        if not isinstance(value, dict)
    ]
    for table, values in settings.items():
        if isinstance(values, dict):
            lines += [f"[{table}]", *(f"{key} = {json.dumps(v)}" for key, v in values.items())]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("persona", "mode"), CASES)
def test_persona_through_the_cli(persona: Persona, mode: Mode, tmp_path: Path) -> None:
    compliant_calls = PERSONAS["compliant"].model_calls(mode)
    config: list[str] = []
    if persona.settings:
        # The settings a persona needs (e.g. a short request timeout), as a config file.
        file = tmp_path / "sandcrew.toml"
        file.write_text(toml_text(persona.settings))
        config = ["--config", str(file)]
    with Server(persona.script(mode)) as server:
        completed = run_cli(
            "solve", FIBONACCI_TASK, "--base-url", server.base_url, "--model", "scripted",
            "--mode", mode, "--json", *config,
        )  # fmt: skip
        calls = [request for request in server.requests if request.method == "POST"]

    assert "Traceback" not in completed.stderr
    summary = json.loads(completed.stdout)
    if persona.rescued:
        assert completed.returncode == 0, summary["stop_detail"]
        assert summary["solved"] is True
        assert FIBONACCI_ANSWER in summary["answer"]
        assert "complete" not in summary["answer"].lower()
        assert "<think>" not in summary["answer"]
        assert len(calls) == compliant_calls + persona.extra_calls
        assert len(calls) <= compliant_calls + 2
        assert len(summary["runs"]) == persona.runs == 1
        assert summary["runs"][0]["stdout"].strip() == FIBONACCI_ANSWER
    else:
        assert completed.returncode == persona.exit_code
        assert summary["solved"] is False
        assert summary["stop_reason"] == persona.stop_reason
        assert persona.cause is not None
        assert persona.cause in summary["stop_detail"]
        assert len(calls) <= 3 * compliant_calls
        assert len(summary["runs"]) == persona.runs


def test_an_unrescued_persona_names_its_cause_on_the_terminal() -> None:
    with Server(PERSONAS["never-signals"].script()) as server:
        completed = run_cli(
            "solve", FIBONACCI_TASK, "--base-url", server.base_url, "--model", "scripted"
        )

    assert completed.returncode == 1
    assert "not solved (no_completion_signal)" in completed.stderr
    assert "without a recognisable completion signal" in completed.stderr


def test_persona_scripts_replay_from_yaml() -> None:
    for persona in PERSONAS.values():
        for mode in persona.modes:
            turns = persona.script(mode)
            data = [turn.model_dump(exclude_none=True, exclude_defaults=True) for turn in turns]
            assert load_script(data) == turns
