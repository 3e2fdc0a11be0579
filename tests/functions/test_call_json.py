"""call_json / acall_json: refusing bad input readably, calling, and serializing results."""

import asyncio
import dataclasses
import enum
import json
import threading
from typing import Any

import pytest
from pydantic import BaseModel, Field, field_validator

from sandcrew.errors import UserError
from sandcrew.functions import FunctionTool, ToolResult, function


class Recorder:
    """Counts calls so every refusal can assert the function never ran."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def review_tool(recorder: Recorder) -> FunctionTool[..., str]:
    @function
    def review_code_block(
        has_multiple_code_blocks: bool,
        is_top_level_statement: bool,
        is_python_code_block: bool,
        is_print_result_to_console: bool,
    ) -> str:
        """Review a code block.

        Args:
            has_multiple_code_blocks: More than one block.
            is_top_level_statement: Top-level script.
            is_python_code_block: Tagged python.
            is_print_result_to_console: Prints its result.
        """
        recorder.calls.append(
            {
                "has_multiple_code_blocks": has_multiple_code_blocks,
                "is_top_level_statement": is_top_level_statement,
                "is_python_code_block": is_python_code_block,
                "is_print_result_to_console": is_print_result_to_console,
            }
        )
        return "The code looks good."

    return review_code_block


GOOD_REVIEW = {
    "has_multiple_code_blocks": False,
    "is_top_level_statement": True,
    "is_python_code_block": True,
    "is_print_result_to_console": True,
}


def assert_refused(result: ToolResult, recorder: Recorder, *fragments: str) -> None:
    assert not result.ok
    assert recorder.calls == []
    assert result.errors, "a refusal lists its problems"
    assert "Traceback" not in result.content
    for fragment in fragments:
        assert fragment in result.content, result.content


def test_good_arguments_call_the_function(recorder: Recorder) -> None:
    result = review_tool(recorder).call_json(json.dumps(GOOD_REVIEW))
    assert result == ToolResult(
        function_name="review_code_block", ok=True, content="The code looks good.", errors=[]
    )
    assert recorder.calls == [GOOD_REVIEW]


@pytest.mark.parametrize(
    ("arguments", "detail"),
    [
        pytest.param("not json", "Expecting value: line 1 column 1", id="words"),
        pytest.param("yes", "Expecting value: line 1 column 1", id="bare-word"),
        pytest.param('{"has_multiple_code_blocks": tru', "line 1 column", id="truncated"),
        pytest.param("{'a': 1}", "Expecting property name enclosed in double quotes", id="quotes"),
        pytest.param('{"has_multiple_code_blocks": NaN}', "NaN is not valid JSON", id="nan"),
    ],
)
def test_malformed_json_is_refused_with_an_example(
    recorder: Recorder, arguments: str, detail: str
) -> None:
    result = review_tool(recorder).call_json(arguments)
    assert_refused(
        result,
        recorder,
        "Error calling review_code_block: arguments are not valid JSON (",
        detail,
        'Send a JSON object like {"has_multiple_code_blocks": true, ...}.',
    )
    assert result.errors[0].startswith("(root): not valid JSON")


def test_the_documented_malformed_json_message_verbatim(recorder: Recorder) -> None:
    result = review_tool(recorder).call_json("oops")
    assert result.content == (
        "Error calling review_code_block: arguments are not valid JSON (Expecting value: "
        'line 1 column 1). Send a JSON object like {"has_multiple_code_blocks": true, ...}.'
    )


@pytest.mark.parametrize(
    ("arguments", "kind"),
    [
        ("[true, true, true, true]", "a JSON array"),
        ('"has_multiple_code_blocks"', "a JSON string"),
        ("42", "a JSON number"),
        ("null", "JSON null"),
        ("true", "the JSON literal true"),
    ],
)
def test_non_object_json_is_refused(recorder: Recorder, arguments: str, kind: str) -> None:
    result = review_tool(recorder).call_json(arguments)
    assert_refused(
        result,
        recorder,
        f"Error calling review_code_block: arguments must be a JSON object, not {kind}.",
        "Send a JSON object like {",
    )


@pytest.mark.parametrize("blank", ["", "   ", "\n\t"])
def test_blank_arguments_mean_an_empty_object(recorder: Recorder, blank: str) -> None:
    result = review_tool(recorder).call_json(blank)
    assert_refused(result, recorder, "/is_python_code_block: missing required property")
    assert len(result.errors) == 4

    @function
    def ping() -> str:
        """Answer pong."""
        return "pong"

    assert ping.call_json(blank) == ToolResult(function_name="ping", ok=True, content="pong")


def test_missing_argument_names_path_and_fix(recorder: Recorder) -> None:
    arguments = {k: v for k, v in GOOD_REVIEW.items() if k != "is_python_code_block"}
    result = review_tool(recorder).call_json(json.dumps(arguments))
    assert_refused(
        result,
        recorder,
        "Error calling review_code_block: the arguments do not match its parameters (1 problem)",
        "/is_python_code_block: missing required property",
        "Call review_code_block again with all required arguments.",
    )
    assert result.errors == ["/is_python_code_block: missing required property"]


def test_extra_argument_is_named_with_the_allowed_ones(recorder: Recorder) -> None:
    # With another problem the call is not repaired: every problem is named.
    arguments = {**GOOD_REVIEW, "is_python_code_block": "yes", "language": "python"}
    result = review_tool(recorder).call_json(json.dumps(arguments))
    assert_refused(
        result,
        recorder,
        "/language: unexpected property (allowed: has_multiple_code_blocks, "
        "is_top_level_statement, is_python_code_block, is_print_result_to_console)",
        "Call review_code_block again with only the parameters it declares",
    )


GOOD_TEXT = json.dumps(GOOD_REVIEW)


@pytest.mark.parametrize(
    ("arguments", "repairs"),
    [
        pytest.param(
            f"```json\n{GOOD_TEXT}\n```", ["took the arguments out of a code fence"], id="fence"
        ),
        pytest.param(
            f"```\n{GOOD_TEXT}\n```\nThat is my review.",
            [
                "took the arguments out of a code fence",
                "ignored the text after the fence: 'That is my review.'",
            ],
            id="fence-and-text",
        ),
        pytest.param(
            f"{GOOD_TEXT}\nI hope this helps!",
            ["ignored the text after the JSON object: 'I hope this helps!'"],
            id="trailing-text",
        ),
        pytest.param(
            json.dumps({**GOOD_REVIEW, "is_python_code_block": "true"}),
            ['read is_python_code_block="true" as true'],
            id="boolean-as-string",
        ),
        pytest.param(
            json.dumps({**GOOD_REVIEW, "has_multiple_code_blocks": "False"}),
            ['read has_multiple_code_blocks="False" as false'],
            id="capitalised-boolean-string",
        ),
        pytest.param(
            json.dumps({**GOOD_REVIEW, "language": "python"}),
            ["dropped the unknown argument 'language'"],
            id="extra-argument",
        ),
    ],
)
def test_loose_but_unambiguous_arguments_are_repaired_and_said_so(
    recorder: Recorder, arguments: str, repairs: list[str]
) -> None:
    result = review_tool(recorder).call_json(arguments)
    assert result.ok, result.content
    assert recorder.calls == [GOOD_REVIEW]
    assert result.repairs == repairs
    assert result.arguments is not None
    assert json.loads(result.arguments) == GOOD_REVIEW


def test_repair_can_be_turned_off_for_callers_that_are_programs(recorder: Recorder) -> None:
    result = review_tool(recorder).call_json(
        json.dumps({**GOOD_REVIEW, "language": "python"}), repair=False
    )
    assert_refused(result, recorder, "/language: unexpected property")
    fenced = review_tool(recorder).call_json(f"```json\n{GOOD_TEXT}\n```", repair=False)
    assert_refused(fenced, recorder, "arguments are not valid JSON")


def test_valid_arguments_need_no_repair(recorder: Recorder) -> None:
    result = review_tool(recorder).call_json(GOOD_TEXT)
    assert (result.repairs, result.arguments) == ([], None)


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param('Sure! {"has_multiple_code_blocks": false}', id="text-before"),
        pytest.param(json.dumps({**GOOD_REVIEW, "is_python_code_block": "yes"}), id="yes"),
        pytest.param(json.dumps({**GOOD_REVIEW, "is_python_code_block": 1}), id="number"),
        pytest.param(f"[{GOOD_TEXT}] trailing", id="array-then-text"),
    ],
)
def test_ambiguous_arguments_are_still_refused(recorder: Recorder, arguments: str) -> None:
    result = review_tool(recorder).call_json(arguments)
    assert not result.ok
    assert recorder.calls == []
    assert result.repairs == []


def test_a_string_parameter_keeps_the_text_true(recorder: Recorder) -> None:
    @function
    def label(text: str, loud: bool) -> str:
        """Echo.

        Args:
            text: Any text.
            loud: Shout.
        """
        return text.upper() if loud else text

    result = label.call_json('{"text": "true", "loud": "false"}')
    assert result.content == "true"
    assert result.repairs == ['read loud="false" as false']


def test_mistyped_argument(recorder: Recorder) -> None:
    result = review_tool(recorder).call_json(
        json.dumps({**GOOD_REVIEW, "is_python_code_block": "yes"})
    )
    assert_refused(
        result,
        recorder,
        "/is_python_code_block: 'yes' is not of type 'boolean'",
        "Call review_code_block again with values that match the parameter schema.",
    )


def test_all_problems_are_reported_at_once(recorder: Recorder) -> None:
    arguments = {"has_multiple_code_blocks": "no", "is_top_level_statement": 1, "extra": 0}
    result = review_tool(recorder).call_json(json.dumps(arguments))
    assert_refused(result, recorder, "(5 problems)")
    assert result.errors == [
        "/has_multiple_code_blocks: 'no' is not of type 'boolean'",
        "/is_top_level_statement: 1 is not of type 'boolean'",
        "/is_python_code_block: missing required property",
        "/is_print_result_to_console: missing required property",
        "/extra: unexpected property (allowed: has_multiple_code_blocks, "
        "is_top_level_statement, is_python_code_block, is_print_result_to_console)",
    ]
    assert result.content.endswith(
        "Call review_code_block again with all required arguments, only the parameters it "
        "declares and values that match the parameter schema."
    )


class LineItem(BaseModel):
    sku: str
    quantity: int = 1


class Cart(BaseModel):
    items: list[LineItem]
    coupon: str | None = None


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "non_strict"])
def test_nested_problems_carry_json_pointer_paths(recorder: Recorder, strict: bool) -> None:
    @function(strict=strict)
    def checkout(cart: Cart, counts: list[int]) -> str:
        recorder.calls.append({"cart": cart})
        return "ok"

    items = [{"sku": "a", "quantity": 1}, {"sku": "b", "quantity": "two"}, {"quantity": 3}]
    arguments = {"cart": {"items": items, "coupon": None}, "counts": [1, 2, "x"]}
    result = checkout.call_json(json.dumps(arguments))
    assert_refused(
        result,
        recorder,
        "/cart/items/1/quantity: 'two' is not of type 'integer'",
        "/cart/items/2/sku: missing required property",
        "/counts/2: 'x' is not of type 'integer'",
    )
    if strict:  # strict closes nested objects and requires every property
        assert "/cart/items/2/quantity" not in result.content
        nested_extra = {"cart": {"items": [], "coupon": None, "note": "x"}, "counts": []}
        refused = checkout.call_json(json.dumps(nested_extra))
        assert_refused(
            refused, recorder, "/cart/note: unexpected property (allowed: items, coupon)"
        )


def test_nested_null_in_strict_mode_restores_field_defaults(recorder: Recorder) -> None:
    @function
    def checkout(cart: Cart) -> str:
        recorder.calls.append({"cart": cart})
        return "ok"

    arguments = {"cart": {"items": [{"sku": "a", "quantity": None}], "coupon": None}}
    assert checkout.call_json(json.dumps(arguments)).ok
    assert recorder.calls == [{"cart": Cart(items=[LineItem(sku="a", quantity=1)])}]


class Username(BaseModel):
    name: str

    @field_validator("name")
    @classmethod
    def lowercase_only(cls, value: str) -> str:
        if value != value.lower():
            raise ValueError("use lowercase letters only")
        return value


def test_conversion_problems_after_schema_validation_are_refused(recorder: Recorder) -> None:
    @function
    def register(user: Username) -> str:
        recorder.calls.append({"user": user})
        return "ok"

    result = register.call_json('{"user": {"name": "Bob"}}')
    assert_refused(
        result,
        recorder,
        "Error calling register: the arguments do not match its parameters (1 problem)",
        "/user/name: Value error, use lowercase letters only",
        "Call register again with values that match the parameter schema.",
    )


def test_exception_in_the_function_becomes_an_error_result() -> None:
    @function
    def divide(a: int, b: int) -> float:
        return a / b

    result = divide.call_json('{"a": 1, "b": 0}')
    assert not result.ok
    assert result.content == (
        "Error calling divide: the function raised ZeroDivisionError: division by zero. "
        "Check the arguments and call divide again, or continue without it."
    )
    assert result.errors == ["(root): ZeroDivisionError: division by zero"]


async def test_exception_in_an_async_function_becomes_an_error_result() -> None:
    @function
    async def fail(reason: str) -> str:
        raise RuntimeError(reason)

    result = await fail.acall_json('{"reason": "disk full"}')
    assert not result.ok
    assert "Error calling fail: the function raised RuntimeError: disk full." in result.content


def test_non_string_arguments_are_a_programming_error(recorder: Recorder) -> None:
    tool = review_tool(recorder)
    with pytest.raises(
        UserError, match=r"takes the model's arguments as a JSON string \(got dict\)"
    ):
        tool.call_json(GOOD_REVIEW)  # type: ignore[arg-type]
    assert recorder.calls == []


class Shape(enum.Enum):
    CIRCLE = "circle"


@dataclasses.dataclass
class Size:
    width: int
    height: int


class Report(BaseModel):
    title: str
    score: float


@pytest.mark.parametrize(
    ("value", "content"),
    [
        pytest.param("plain text", "plain text", id="str-as-is"),
        pytest.param('{"not": "re-encoded"}', '{"not": "re-encoded"}', id="json-str-as-is"),
        pytest.param(None, "", id="none-empty"),
        pytest.param(True, "true", id="bool"),
        pytest.param(3, "3", id="int"),
        pytest.param(2.5, "2.5", id="float"),
        pytest.param(
            Report(title="ünïcode", score=1.0), '{"title": "ünïcode", "score": 1.0}', id="model"
        ),
        pytest.param(Size(2, 3), '{"width": 2, "height": 3}', id="dataclass"),
        pytest.param({"a": [1, (2, 3)]}, '{"a": [1, [2, 3]]}', id="dict"),
        pytest.param([Shape.CIRCLE], '["circle"]', id="list-of-enum"),
        pytest.param((1, "a"), '[1, "a"]', id="tuple"),
        pytest.param({7}, "[7]", id="set"),
        pytest.param(Shape.CIRCLE, '"circle"', id="enum"),
    ],
)
def test_results_are_serialized_as_text_or_json(value: object, content: str) -> None:
    @function
    def produce() -> object:
        return value

    result = produce.call_json("{}")
    assert result.ok
    assert result.content == content


def test_unserializable_result_is_reported_not_repr() -> None:
    @function
    def leak() -> object:
        return threading.Lock()

    result = leak.call_json("{}")
    assert not result.ok
    assert "Error calling leak: its result could not be turned into text" in result.content
    assert "fault in the function" in result.content
    assert "<unlocked" not in result.content


def test_async_function_runs_to_completion_in_call_json() -> None:
    @function
    async def slow_add(a: int, b: int) -> int:
        await asyncio.sleep(0)
        return a + b

    assert slow_add.call_json('{"a": 2, "b": 3}').content == "5"


async def test_call_json_refuses_an_async_function_inside_a_running_loop() -> None:
    calls: list[int] = []

    @function
    async def slow_add(a: int, b: int) -> int:
        calls.append(a)
        return a + b

    with pytest.raises(UserError, match=r"use `await slow_add.acall_json\(...\)`"):
        slow_add.call_json('{"a": 2, "b": 3}')
    assert calls == []
    assert (await slow_add.acall_json('{"a": 2, "b": 3}')).content == "5"


async def test_acall_json_runs_sync_functions_in_a_worker_thread() -> None:
    threads: list[int] = []

    @function
    def where() -> str:
        threads.append(threading.get_ident())
        return "done"

    assert (await where.acall_json("{}")).content == "done"
    assert len(threads) == 1
    assert threads[0] != threading.get_ident()


def test_sync_call_json_works_inside_a_running_loop_for_sync_functions() -> None:
    @function
    def echo(text: str) -> str:
        return text

    async def main() -> ToolResult:
        return echo.call_json('{"text": "hi"}')

    assert asyncio.run(main()).content == "hi"


def test_field_default_in_the_signature_is_applied() -> None:
    received: list[int] = []

    @function(strict=False)
    def page(size: int = Field(20, ge=1, description="Rows per page.")) -> str:
        received.append(size)
        return "ok"

    @function
    def page_strict(size: int = Field(20, ge=1, description="Rows per page.")) -> str:
        received.append(size)
        return "ok"

    assert page.call_json("{}").ok
    assert page_strict.call_json('{"size": null}').ok
    assert page.call_json('{"size": 5}').ok
    assert received == [20, 20, 5]
    refused = page.call_json('{"size": 0}')
    assert not refused.ok
    assert "/size: 0 is less than the minimum of 1" in refused.content


def test_positional_only_parameters_are_passed_positionally() -> None:
    @function(strict=False)
    def scale(value: float, factor: float = 2.0, /, *, offset: float = 0.0) -> float:
        return value * factor + offset

    assert scale.call_json('{"value": 3}').content == "6.0"
    assert scale.call_json('{"value": 3, "factor": 3, "offset": 1}').content == "10.0"


def test_optional_parameter_with_a_non_null_default_keeps_null_as_none() -> None:
    received: list[int | None] = []

    @function
    def limit(rows: int | None = 100) -> str:
        received.append(rows)
        return "ok"

    assert limit.call_json('{"rows": null}').ok
    assert received == [None]
