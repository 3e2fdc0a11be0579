"""The crew against servers whose chat templates accept only alternating turns (Gemma,
Mistral): every persona of the matrix, on the scripted server's strict-template mode."""

from __future__ import annotations

import pytest

from sandcrew.crew import solve_task
from sandcrew.testing import (
    FIBONACCI_ANSWER,
    FIBONACCI_TASK,
    PERSONAS,
    Persona,
    RecordedRequest,
    ScriptedModelServer,
    StrictTemplate,
)
from sandcrew.testing._personas import Mode
from tests.crew.conftest import settings_for
from tests.crew.fakes import fibonacci_sandbox

TEMPLATES = {
    "alternation-400": StrictTemplate(),
    "no-system-400": StrictTemplate(system_role=False),
    "alternation-500": StrictTemplate(status=500),
    "alternation-empty": StrictTemplate(answer="empty"),
}
EXTRA_PER_AGENT = {
    # refused requests of one agent at most: one refusal, or (empty answers) the two empty
    # replies that tell a silent refusal from a fluke
    "alternation-400": 1,
    "no-system-400": 1,
    "alternation-500": 1,
    "alternation-empty": 2,
}
SLOW = {"stalled-server"}  # waits for a request timeout: its cause is not the template
EVERY_TEMPLATE = {
    # personas whose habit meets the other refusals (empty replies, errors, no tools)
    "compliant",
    "empty-replies",
    "forced-choice-empty",
    "ollama-no-tools",
    "small-context",
    "never-signals",
    "rambling-selector",
}

CASES = [
    pytest.param(persona, mode, template, id=f"{name}-{mode}-{template}")
    for name, persona in PERSONAS.items()
    if name not in SLOW
    for mode in persona.modes
    for template in TEMPLATES
    if template == "alternation-400" or name in EVERY_TEMPLATE
]


def refused(requests: list[RecordedRequest]) -> list[RecordedRequest]:
    return [request for request in requests if request.template_objection is not None]


@pytest.mark.parametrize(("persona", "mode", "template"), CASES)
async def test_every_persona_against_a_strict_template(
    persona: Persona, mode: Mode, template: str
) -> None:
    server = ScriptedModelServer(persona.script(mode), strict_template=TEMPLATES[template])
    settings = settings_for(server.start(), mode=mode, **persona.settings)
    with server:
        result = await solve_task(FIBONACCI_TASK, settings, sandbox=fibonacci_sandbox())
        requests = [request for request in server.requests if request.method == "POST"]

    turned_away = refused(requests)
    assert turned_away, "the crew's first request does not alternate: the template refuses it"
    # found once, for every agent: after the first accepted request nothing is refused
    first_accepted = next(i for i, r in enumerate(requests) if r.template_objection is None)
    assert all(r.template_objection is None for r in requests[first_accepted:])
    per_agent = {r.agent: sum(x.agent == r.agent for x in turned_away) for r in turned_away}
    assert len(per_agent) == 1  # the agents of one endpoint share what the first found
    assert max(per_agent.values()) <= EXTRA_PER_AGENT[template]
    accepted = len(requests) - len(turned_away)
    assert accepted == persona.model_calls(mode) or not persona.rescued
    if persona.rescued:
        assert result.solved, result.stop_detail
        assert FIBONACCI_ANSWER in (result.answer or "")
        assert len(result.runs) == 1
    else:
        assert not result.solved
        assert result.stop_reason.value == persona.stop_reason
        assert persona.cause is not None
        assert persona.cause in result.stop_detail
