"""Pure parts of the crew: provable code facts, the verdict, the admin's signal, the runner."""

from __future__ import annotations

import json

import pytest

from sandcrew.agents import TextMessage
from sandcrew.crew import (
    APPROVAL_TEXT,
    COMMENTS_HEADLINE,
    NO_CODE_REPLY,
    ReviewClaims,
    RunnerAgent,
    code_to_run,
    crew_workflow,
    decide,
    inspect_code,
    review_code_block,
)
from tests.crew.fakes import fibonacci_sandbox

GOOD_CLAIMS = ReviewClaims(
    has_multiple_code_blocks=False,
    is_top_level_statement=True,
    is_python_code_block=True,
    is_print_result_to_console=True,
)


def test_facts_of_a_good_python_block() -> None:
    facts = inspect_code("Here:\n```python\nx = 2\nprint(x * 21)\n```")
    assert (facts.block_count, facts.language, facts.syntax_error) == (1, "python", None)
    assert facts.top_level is True
    assert facts.prints_result is True


@pytest.mark.parametrize(
    ("text", "expected_comment"),
    [
        ("no code at all", "There is no code block"),
        ("```python\nprint(1)\n```\n```python\nprint(2)\n```", "multiple code blocks"),
        ("```ruby\nputs 1\n```", "The code block is ruby"),
        ("```\necho one two\n```", "The code block is untagged"),
        ("```python\nprint(1\n```", "does not parse (line 1"),
        ("```python\ndef main():\n    print(1)\n```", "does not run at the top level"),
        ("```python\nx = 6 * 7\n```", "does not print its result"),
    ],
    ids=["no-block", "two-blocks", "ruby", "untagged", "syntax", "not-top-level", "no-print"],
)
def test_provable_problems_override_an_approving_model(text: str, expected_comment: str) -> None:
    verdict = decide(GOOD_CLAIMS, inspect_code(text))
    assert not verdict.approved
    assert expected_comment in verdict.to_text()
    assert verdict.to_text().startswith(COMMENTS_HEADLINE)


def test_the_models_objections_are_kept() -> None:
    claims = GOOD_CLAIMS.model_copy(update={"is_top_level_statement": False})
    verdict = decide(claims, inspect_code("```python\nprint(1)\n```"))
    assert not verdict.approved
    assert verdict.comments == [
        "The code does not run at the top level. Write a script whose statements run "
        "directly (call your functions at module level)."
    ]


def test_approval_text_is_the_seeds() -> None:
    verdict = decide(GOOD_CLAIMS, inspect_code("```py\nprint(63245986)\n```"))
    assert verdict.approved
    assert verdict.to_text() == APPROVAL_TEXT


def test_review_function_contract_and_wrapper() -> None:
    tool = review_code_block.to_openai_tool()
    parameters = tool["function"]["parameters"]
    assert sorted(parameters["required"]) == sorted(GOOD_CLAIMS.model_dump())
    result = review_code_block.call_json(json.dumps(GOOD_CLAIMS.model_dump()))
    assert result.ok
    assert json.loads(result.content) == GOOD_CLAIMS.model_dump()
    bad = review_code_block.call_json('{"has_multiple_code_blocks": "no"}')
    assert not bad.ok
    assert "/has_multiple_code_blocks" in bad.content


async def test_runner_without_a_coder_message_asks_for_code() -> None:
    runner = RunnerAgent(fibonacci_sandbox())
    reply = await runner.generate_reply([TextMessage(content="task", sender="admin")])
    assert reply.content == NO_CODE_REPLY
    assert runner.runs == []


async def test_workflow_branches_on_structured_data_not_text() -> None:
    from sandcrew.agents import DefaultReplyAgent

    admin, coder, reviewer, runner = (
        DefaultReplyAgent(n, "") for n in ("admin", "coder", "reviewer", "runner")
    )
    graph = crew_workflow(admin, coder, reviewer, runner)
    approving = decide(GOOD_CLAIMS, inspect_code("```python\nprint(1)\n```"))
    # Text that *looks* like an approval but carries no verdict routes nowhere.
    impostor = TextMessage(content=APPROVAL_TEXT, sender="reviewer")
    genuine = TextMessage(content="anything", sender="reviewer", data=approving)
    assert [a.name for a in await graph.next_agents("reviewer", [impostor])] == []
    assert [a.name for a in await graph.next_agents("reviewer", [genuine])] == ["runner"]


FUNCTION_BLOCK = "```python\ndef fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n" \
    "        a, b = b, a + b\n    return a\n```"  # fmt: skip


@pytest.mark.parametrize(
    ("text", "language", "expected_code"),
    [
        ("```\nprint(6 * 7)\n```", "python", "print(6 * 7)\n"),
        (
            f"{FUNCTION_BLOCK}\nUse it like this:\n```python\nprint(fibonacci(39))\n```",
            "python",
            "return a\n\nprint(fibonacci(39))\n",
        ),
        (f"{FUNCTION_BLOCK}\n```\nprint(fibonacci(39))\n```", "python", "print(fibonacci(39))\n"),
        ("```python\nprint(1)\n```\nor better:\n```python\nprint(2)\n```", "python", "print(2)\n"),
        ("```\necho one two\n```", None, "echo one two\n"),
    ],
    ids=["untagged-python", "function-and-usage", "function-and-untagged-usage",
         "two-programs", "untagged-not-python"],
)  # fmt: skip
def test_the_program_to_run_is_what_is_unambiguous(
    text: str, language: str | None, expected_code: str
) -> None:
    block = code_to_run(text)
    assert block is not None
    assert block.language == language
    assert block.code.endswith(expected_code)


def test_joined_blocks_are_one_program_for_the_review() -> None:
    facts = inspect_code(f"{FUNCTION_BLOCK}\n```python\nprint(fibonacci(39))\n```")
    assert (facts.block_count, facts.joined, facts.has_multiple_code_blocks) == (2, True, False)
    assert decide(GOOD_CLAIMS, facts).approved
    two_programs = inspect_code("```python\nprint(1)\n```\n```python\nprint(2)\n```")
    assert two_programs.has_multiple_code_blocks
    assert not decide(GOOD_CLAIMS, two_programs).approved
