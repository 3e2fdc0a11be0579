"""`sandcrew solve` against endpoint personas: the real CLI, the real openai client over HTTP
to the scripted server replaying how real servers answer, and real containers."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from sandcrew.agents._tokens import estimate_prompt_tokens
from sandcrew.testing import PERSONAS, ScriptedModelServer
from tests.crew.conftest import FIBONACCI_ANSWER, FIBONACCI_TASK, run_cli

pytestmark = pytest.mark.docker

COMPLIANT_CALLS = 3
"""coder, reviewer, admin: the model calls of a model that answers exactly as asked."""

RESCUED: dict[str, tuple[int, str | None]] = {
    # persona: (model requests, a note the transcript must show)
    "compliant": (3, None),
    "booleans-as-strings": (3, 'read is_python_code_block="true" as true'),
    "extra-argument": (3, "dropped the unknown argument 'language'"),
    "fenced-arguments": (3, "took the arguments out of a code fence"),
    "arguments-as-object": (3, "as a JSON value, not as a JSON string"),
    "call-as-plain-json": (3, "from the reply's text"),
    "tool-call-block": (3, "from the reply's text"),
    "parallel-identical-calls": (3, "dropped a repeated identical call to review_code_block"),
    "parallel-disagreeing-calls": (4, "none was taken"),
    "ollama-no-tools": (4, "reviewed without tools"),
    "vllm-named-choice-only": (3, None),
    "forced-choice-rejected": (5, "rejected tool_choice"),
    "forced-choice-empty": (4, "attempt 1: empty reply"),
    "empty-replies": (5, "coder gave an empty reply"),
    "no-usage": (3, None),
}
NOT_RESCUED = {"stalled-server", "invalid-review-calls"}


def test_every_persona_is_in_the_matrix() -> None:
    endpoint_personas = set(RESCUED) | NOT_RESCUED
    assert endpoint_personas <= set(PERSONAS)


def solve(server: ScriptedModelServer, tmp_path: Path, *extra: str) -> tuple[Any, Any, list[Any]]:
    transcript = tmp_path / "chat.jsonl"
    completed = run_cli(
        "solve", FIBONACCI_TASK, "--base-url", server.base_url, "--model", "scripted",
        "--json", "--transcript", str(transcript), *extra,
    )  # fmt: skip
    assert "Traceback" not in completed.stderr
    records = [json.loads(line) for line in transcript.read_text().splitlines()]
    summary = json.loads(completed.stdout) if completed.stdout.strip() else None
    return completed, summary, records


def model_calls(server: ScriptedModelServer) -> list[Any]:
    """The chat requests the crew made (the pre-flight's GET /models is not a model call)."""
    return [request for request in server.requests if request.method == "POST"]


def notes_of(records: list[dict[str, Any]]) -> list[str]:
    """The notes of every message and of the result."""
    held = [record.get("message") or record.get("result") or {} for record in records]
    return [note for record in held for note in record.get("notes", [])]


@pytest.mark.parametrize("name", sorted(RESCUED))
def test_the_crew_solves_with_a_rescuable_persona(name: str, tmp_path: Path) -> None:
    expected_calls, note = RESCUED[name]
    with ScriptedModelServer(PERSONAS[name].script()) as server:
        completed, summary, records = solve(server, tmp_path)

    assert completed.returncode == 0, completed.stderr
    assert summary["solved"] is True
    assert FIBONACCI_ANSWER in summary["answer"]
    assert len(summary["runs"]) == 1  # the first code was right: one container run
    assert len(model_calls(server)) == expected_calls
    assert expected_calls <= COMPLIANT_CALLS + 2
    if note is not None:
        assert any(note in text for text in notes_of(records)), notes_of(records)
    assert summary["tokens_estimated"] is (name == "no-usage")
    assert summary["total_tokens"] > 0


def test_a_stalled_server_stops_the_crew_as_slow_and_gets_the_request_once(
    tmp_path: Path,
) -> None:
    with ScriptedModelServer(PERSONAS["stalled-server"].script()) as server:
        completed, summary, _ = solve(server, tmp_path, "--request-timeout", "1")

    # An endpoint that does not answer in time is infrastructure (exit 3), not "not solved".
    assert completed.returncode == 3
    assert summary["stop_reason"] == "error"
    assert "is slow: no answer within 1.0 s" in summary["stop_detail"]
    assert "was not sent again" in summary["stop_detail"]
    assert len(model_calls(server)) == 1
    # the abandoned request is counted (estimated)
    assert summary["total_tokens"] > 0
    assert summary["tokens_estimated"] is True


def test_review_calls_that_cannot_be_repaired_stop_with_the_cause(tmp_path: Path) -> None:
    with ScriptedModelServer(PERSONAS["invalid-review-calls"].script()) as server:
        completed, summary, records = solve(server, tmp_path)

    assert completed.returncode == 1
    assert summary["stop_reason"] == "error"
    assert (
        "did not make a valid call to review_code_block in 3 attempt(s)" in (summary["stop_detail"])
    )
    assert "'maybe' is not of type 'boolean'" in summary["stop_detail"]
    assert len(model_calls(server)) <= 3 * COMPLIANT_CALLS
    assert summary["runs"] == []
    assert [r["attempt"] for r in records if r["event"] == "tool_call_attempt"] == [1, 2, 3]


def test_every_request_carries_max_tokens_within_the_budget(tmp_path: Path) -> None:
    budget = 5000
    with ScriptedModelServer(PERSONAS["no-usage"].script()) as server:
        completed, summary, _ = solve(server, tmp_path, "--token-budget", str(budget))

    assert completed.returncode == 0, completed.stderr
    calls = model_calls(server)
    caps = [request.body["max_tokens"] for request in calls]
    # The prompt is paid for first (estimated): the reply gets what is left after it.
    assert caps[0] == budget - estimate_prompt_tokens(calls[0].body)
    assert all(later < earlier for earlier, later in itertools.pairwise(caps))
    assert summary["total_tokens"] <= budget
    assert summary["tokens_estimated"] is True


def test_a_budget_too_small_for_the_next_request_stops_before_sending_it(
    tmp_path: Path,
) -> None:
    # The coder's prompt alone costs more than 60 tokens: no request is sent at all.
    server = ScriptedModelServer(PERSONAS["no-usage"].script(), require_all_used=False)
    with server:
        completed, summary, _ = solve(server, tmp_path, "--token-budget", "60")

    assert completed.returncode == 1
    assert summary["stop_reason"] == "token_budget"
    assert "no further request" in summary["stop_detail"]
    assert model_calls(server) == []
