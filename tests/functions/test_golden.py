"""The rendered OpenAI tool definitions match the checked-in golden files.

After an intended change run ``python -m tests.functions.regenerate_golden`` and review
the diff of ``tests/functions/golden``.
"""

import json

import pytest
from jsonschema import Draft202012Validator

from tests.functions.golden_functions import (
    GOLDEN_TOOLS,
    Calculator,
    golden_file_name,
    review_code_block,
)
from tests.functions.regenerate_golden import GOLDEN_DIR, render_golden
from tests.functions.schema_rules import is_valid, minimal_instance, strict_rule_violations

RENDERINGS = [
    pytest.param(tool, strict, id=golden_file_name(tool, strict))
    for tool, modes in GOLDEN_TOOLS
    for strict in modes
]


@pytest.mark.parametrize(("tool", "strict"), RENDERINGS)
def test_rendering_matches_golden_file(tool, strict) -> None:
    path = GOLDEN_DIR / golden_file_name(tool, strict)
    assert path.exists(), f"missing {path.name}; run python -m tests.functions.regenerate_golden"
    expected = json.loads(path.read_text(encoding="utf-8"))
    assert tool.contract.to_openai_tool(strict=strict) == expected


def test_golden_directory_holds_exactly_the_expected_files() -> None:
    assert sorted(p.name for p in GOLDEN_DIR.glob("*.json")) == sorted(render_golden())


def test_regeneration_is_byte_identical_to_checked_in_files() -> None:
    for name, text in render_golden().items():
        assert (GOLDEN_DIR / name).read_text(encoding="utf-8") == text, name


@pytest.mark.parametrize(("tool", "strict"), RENDERINGS)
def test_rendered_parameters_are_valid_draft_2020_12(tool, strict) -> None:
    parameters = tool.contract.to_openai_tool(strict=strict)["function"]["parameters"]
    Draft202012Validator.check_schema(parameters)
    assert parameters["type"] == "object"
    assert parameters["additionalProperties"] is False
    if strict:
        assert strict_rule_violations(parameters) == []
        assert tool.contract.to_openai_tool(strict=True)["function"]["strict"] is True
    else:
        assert "strict" not in tool.contract.to_openai_tool(strict=False)["function"]


@pytest.mark.parametrize(("tool", "strict"), RENDERINGS)
def test_generated_arguments_fit_the_rendered_schema(tool, strict) -> None:
    parameters = tool.contract.to_openai_tool(strict=strict)["function"]["parameters"]
    assert is_valid(parameters, minimal_instance(parameters))


@pytest.mark.parametrize("tool", [tool for tool, _ in GOLDEN_TOOLS], ids=lambda tool: tool.name)
def test_generated_arguments_call_the_function(tool) -> None:
    parameters = tool.to_openai_tool()["function"]["parameters"]
    arguments = json.dumps(minimal_instance(parameters))
    if tool is Calculator.add:
        tool = Calculator(offset=100).add
    result = tool.call_json(arguments)
    assert result.ok, result.content
    assert result.errors == []


def test_review_code_block_renders_the_docstring_descriptions() -> None:
    function = review_code_block.to_openai_tool()["function"]
    assert function["description"] == "Review a code block written by the coder."
    properties = function["parameters"]["properties"]
    assert properties["is_python_code_block"] == {
        "description": "True when the code block is tagged python.",
        "type": "boolean",
    }
    assert function["parameters"]["required"] == [
        "has_multiple_code_blocks",
        "is_top_level_statement",
        "is_python_code_block",
        "is_print_result_to_console",
    ]
