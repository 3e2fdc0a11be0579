"""Decoration: contracts, descriptions from every source, methods, and definition errors."""

import json
import socket
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sandcrew.errors import UserError
from sandcrew.functions import (
    FunctionContract,
    FunctionDefinitionError,
    FunctionTool,
    ParameterContract,
    function,
)
from tests.functions.golden_functions import (
    Calculator,
    count_words,
    fetch_status,
    resize_image,
    schedule,
    search_documents,
    set_temperature,
)


def descriptions(tool: FunctionTool[..., Any]) -> dict[str, str | None]:
    return {p.name: p.description for p in tool.contract.parameters}


def test_google_docstring_keeps_multi_line_texts_whole() -> None:
    contract = search_documents.contract
    assert contract.description == (
        "Search the document store (Google style).\n\n"
        "Matches titles and bodies; results are ordered by relevance,\nbest first."
    )
    assert descriptions(search_documents)["query"] == (
        "Words to look for. Quoted phrases match exactly;\n"
        "a leading minus excludes a word.\n\nMatching ignores case."
    )
    assert contract.return_description == "The titles of the matching documents."
    assert contract.return_type == "list[str]"
    assert contract.return_json_schema == {"type": "array", "items": {"type": "string"}}


def test_numpy_docstring() -> None:
    assert resize_image.contract.description == "Resize the current image (NumPy style)."
    assert descriptions(resize_image) == {
        "width": "New width in pixels.",
        "height": "New height in pixels,\nmeasured after rotation.",
        "keep_aspect": "Pad instead of stretching when the aspect ratio changes.",
    }
    assert resize_image.contract.return_description == "The final width and height."


def test_sphinx_docstring_and_explicit_name() -> None:
    assert schedule.name == "schedule_meeting"
    assert schedule.__name__ == "schedule"
    assert schedule.contract.description == "Book a meeting room (Sphinx style)."
    assert descriptions(schedule)["room"] == (
        "Which room to book; no room means an online meeting."
    )
    assert schedule.contract.return_description == "The booking reference."


def test_field_beats_annotated_beats_docstring_and_explicit_description_wins() -> None:
    assert set_temperature.contract.description == (
        "Set the target temperature of one heating zone."
    )
    assert descriptions(set_temperature) == {
        "celsius": "Target temperature in degrees Celsius.",
        "zone": "Heating zone identifier.",
        "mode": "Strategy used to reach the target.",
    }
    assert set_temperature.contract.return_description == "A confirmation for the user."


def test_parameter_contracts_carry_schema_default_and_required() -> None:
    zone, mode = set_temperature.contract.parameters[1:]
    assert zone == ParameterContract(
        name="zone",
        description="Heating zone identifier.",
        json_schema={"description": "Heating zone identifier.", "type": "string", "minLength": 1},
        required=False,
        default="main",
        has_default=True,
    )
    assert mode.default == "auto"  # the enum's JSON value, not the member
    assert mode.json_schema["$ref"] == "#/$defs/ThermostatMode"
    assert set(mode.json_schema["$defs"]) == {"ThermostatMode"}  # self-contained
    celsius = set_temperature.contract.parameters[0]
    assert celsius.required
    assert not celsius.has_default


def test_async_function_contract_and_direct_call() -> None:
    import asyncio

    assert fetch_status.contract.return_type == "ServiceStatus"
    assert fetch_status.contract.return_json_schema is not None
    coroutine = fetch_status("db")
    status = asyncio.run(coroutine)
    assert status.service == "db"


def test_tool_is_the_function_unchanged() -> None:
    assert resize_image(3, 4) == {"width": 3, "height": 4}
    assert resize_image(3, 4, keep_aspect=False) == {"width": 3, "height": 4}
    assert "NumPy style" in (resize_image.__doc__ or "")
    assert resize_image.__wrapped__(1, 2) == {"width": 1, "height": 2}  # type: ignore[attr-defined]
    assert isinstance(resize_image, FunctionTool)
    assert repr(resize_image) == "<FunctionTool resize_image strict=True>"


def test_strict_defaults_to_true_and_to_openai_tool_follows_it() -> None:
    assert resize_image.strict is True
    assert resize_image.to_openai_tool()["function"]["strict"] is True
    assert count_words.strict is False
    assert "strict" not in count_words.to_openai_tool()["function"]
    assert resize_image.to_openai_tool() == resize_image.contract.to_openai_tool(strict=True)
    assert count_words.to_openai_tool() == count_words.contract.to_openai_tool(strict=False)


def test_to_openai_tool_offers_only_the_schema_call_json_checks() -> None:
    with pytest.raises(TypeError):
        resize_image.to_openai_tool(strict=False)  # type: ignore[call-arg]
    # what the model is sent is what the arguments are checked against: strict mode makes
    # optional parameters nullable, so null is accepted and means "use the default"
    parameters = resize_image.to_openai_tool()["function"]["parameters"]
    assert {"type": "null"} in parameters["properties"]["keep_aspect"]["anyOf"]
    arguments = json.dumps({"width": 3, "height": 4, "keep_aspect": None})
    result = resize_image.call_json(arguments)
    assert result.ok, result.content


def test_method_binds_self_and_hides_it_from_the_schema() -> None:
    contract = Calculator.add.contract
    assert [p.name for p in contract.parameters] == ["a", "b"]
    calculator = Calculator(offset=10)
    assert calculator.add(1, 2) == 13
    assert Calculator.add(calculator, 1) == 11
    result = calculator.add.call_json('{"a": 1, "b": null}')
    assert result.ok
    assert result.content == "11"
    assert calculator.add.contract is contract
    assert "self" not in json.dumps(calculator.add.to_openai_tool())


async def test_bound_method_async_wrapper() -> None:
    calculator = Calculator(offset=1)
    assert (await calculator.add.acall_json('{"a": 1, "b": 1}')).content == "3"


def test_cls_receiver_binds_the_class() -> None:
    class Registry:
        prefix = "reg"

        @function
        def label(cls, key: str) -> str:
            return f"{cls.prefix}:{key}"

    assert [p.name for p in Registry.label.contract.parameters] == ["key"]
    assert Registry.label.call_json('{"key": "a"}').content == "reg:a"
    assert Registry().label.call_json('{"key": "b"}').content == "reg:b"


def test_hand_built_contract_renders_both_modes() -> None:
    contract = FunctionContract(
        name="lookup",
        description="Look a word up.",
        parameters=[
            ParameterContract(
                name="word", description=None, json_schema={"type": "string"}, required=True
            ),
            ParameterContract(
                name="limit",
                json_schema={"type": "integer"},
                required=False,
                default=3,
                has_default=True,
            ),
        ],
        return_type="str",
    )
    assert contract.parameters_json_schema(strict=False) == {
        "type": "object",
        "properties": {"word": {"type": "string"}, "limit": {"type": "integer", "default": 3}},
        "required": ["word"],
        "additionalProperties": False,
    }
    assert contract.parameters_json_schema(strict=True)["properties"]["limit"] == {
        "anyOf": [{"type": "integer"}, {"type": "null"}]
    }
    returned = contract.parameters_json_schema(strict=True)
    returned["properties"].clear()
    assert contract.parameters_json_schema(strict=True)["properties"], "returns copies"


def test_contract_models_check_their_invariants() -> None:
    with pytest.raises(ValidationError, match="required must be the opposite of has_default"):
        ParameterContract(
            name="x", json_schema={"type": "integer"}, required=True, has_default=True
        )
    with pytest.raises(ValueError, match=r"parameter names must be unique \(repeated: x\)"):
        FunctionContract(
            name="f",
            description="",
            parameters=[
                ParameterContract(name="x", json_schema={"type": "integer"}, required=True),
                ParameterContract(name="x", json_schema={"type": "string"}, required=True),
            ],
            return_type="str",
        )


def test_contract_with_an_open_map_refuses_strict_rendering() -> None:
    with pytest.raises(UserError, match=r"count_words\(\) cannot be rendered in strict mode"):
        count_words.contract.to_openai_tool(strict=True)
    assert count_words.contract.strict_problems == [
        "parameter 'counts': counts is an open map (dict[str, ...]): strict mode needs every key "
        "declared in advance; use a pydantic model, dataclass or TypedDict with fixed fields (or "
        "a list of key/value objects), or pass strict=False to @function"
    ]


# --- definition errors -------------------------------------------------------------------


def problems_of(fn: Callable[..., Any], **options: Any) -> list[str]:
    with pytest.raises(FunctionDefinitionError) as raised:
        function(**options)(fn)
    assert isinstance(raised.value, UserError)
    assert str(raised.value).startswith(f"@function cannot make a tool from {fn.__qualname__}()")
    for problem in raised.value.problems:
        assert f"- {problem}" in str(raised.value)
    return raised.value.problems


def test_every_problem_is_listed_at_once_each_naming_its_parameter() -> None:
    def broken(
        untyped, conn: socket.socket, callback: Callable[[int], int], *args: int, **kw: str
    ) -> str:  # type: ignore[no-untyped-def]
        """Broken.

        Args:
            untyped: no type.
            ghost: not a parameter.
        """
        return ""

    problems = problems_of(broken)
    assert len(problems) == 6
    assert problems[0].startswith("parameter 'untyped' has no type annotation; annotate it")
    assert problems[1].startswith(
        "parameter 'conn': type socket cannot be expressed as JSON schema"
    )
    assert problems[2].startswith("parameter 'callback': type Callable[[int], int] cannot be")
    assert (
        problems[3] == "parameter '*args': *args cannot be expressed as JSON; list each parameter"
    )
    assert problems[4] == (
        "parameter '**kw': **kwargs cannot be expressed as JSON; list each parameter"
    )
    assert problems[5] == (
        "the docstring describes parameter 'ghost', which broken() does not have; fix the "
        "docstring or the signature"
    )


@pytest.mark.parametrize("annotation", [Any, object], ids=["Any", "object"])
def test_untyped_any_is_refused(annotation: Any) -> None:
    def vague(value):  # type: ignore[no-untyped-def]
        return ""

    vague.__annotations__ = {"value": annotation}
    [problem] = problems_of(vague)
    assert problem.startswith(
        f"parameter 'value' is annotated {annotation.__name__ if annotation is object else 'Any'}"
    )
    assert "tells the model nothing" in problem


class Settings(BaseModel):
    extras: dict[str, str]


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str


def test_strict_mode_rejects_every_open_map_with_advice() -> None:
    def configure(tags: dict[str, int], settings: Settings, loose: Loose) -> str:
        return ""

    problems = problems_of(configure)
    assert problems == [
        f"parameter 'tags': tags is an open map (dict[str, ...]): {ADVICE}",
        f"parameter 'settings': Settings.extras is an open map (dict[str, ...]): {ADVICE}",
        f"parameter 'loose': Loose is an open map (dict[str, ...]): {ADVICE}",
    ]
    assert function(strict=False)(configure).strict is False


ADVICE = (
    "strict mode needs every key declared in advance; use a pydantic model, dataclass or "
    "TypedDict with fixed fields (or a list of key/value objects), or pass strict=False to "
    "@function"
)


def test_strict_mode_rejects_nested_any() -> None:
    def collect(values: list[Any]) -> str:
        return ""

    assert problems_of(collect) == [
        "parameter 'values': values[] accepts any JSON value, which strict mode cannot "
        "express; give it a concrete type"
    ]
    assert function(strict=False)(collect).call_json('{"values": [1, "a"]}').ok


def test_bad_names_generators_and_non_functions() -> None:
    def fine(x: int) -> int:
        return x

    assert problems_of(fine, name="has space") == [
        "tool name 'has space' is not allowed: use 1-64 letters, digits, '_' or '-' "
        "(pass name=... to @function)"
    ]

    def numbers(n: int):  # type: ignore[no-untyped-def]
        yield n

    assert problems_of(numbers) == [
        "generator functions cannot be tools; return a list instead of yielding"
    ]
    with pytest.raises(FunctionDefinitionError, match="expects a def or async def function"):
        function(print)  # type: ignore[arg-type]


def test_non_json_default_and_unexpressible_return_type() -> None:
    sentinel = object()

    def odd(marker: int = sentinel) -> socket.socket:  # type: ignore[assignment]
        raise NotImplementedError

    problems = problems_of(odd)
    assert problems[0].startswith("parameter 'marker': its default <object object at")
    assert "use a JSON-compatible default such as None" in problems[0]
    assert problems[1].startswith("return type socket cannot be expressed as JSON")


def test_unresolvable_annotation() -> None:
    def forward(x: "Missing") -> str:  # type: ignore[name-defined]  # noqa: F821
        return ""

    [problem] = problems_of(forward)
    assert problem.startswith("cannot resolve its type annotations (name 'Missing' is not defined)")


def test_description_sources_without_docstring() -> None:
    @function
    def bare(count: Annotated[int, Field(description="How many.")], note: str = "") -> None:
        return None

    assert bare.contract.description == ""
    assert "description" not in bare.to_openai_tool()["function"]
    assert descriptions(bare) == {"count": "How many.", "note": None}
    assert bare.contract.return_type == "None"
    assert bare.contract.return_json_schema == {"type": "null"}
    assert bare.call_json('{"count": 1, "note": null}').content == ""


def test_unannotated_return_is_allowed() -> None:
    @function
    def anything(x: int):  # type: ignore[no-untyped-def]
        return [x]

    assert anything.contract.return_type == "Any"
    assert anything.contract.return_json_schema is None
    assert anything.call_json('{"x": 1}').content == "[1]"


def test_an_already_bound_method_can_become_a_tool() -> None:
    class Greeter:
        def __init__(self, greeting: str) -> None:
            self.greeting = greeting

        def greet(self, name: str) -> str:
            """Greet someone.

            Args:
                name: Who to greet.
            """
            return f"{self.greeting}, {name}"

    tool = function(Greeter("Hello").greet)
    assert [p.name for p in tool.contract.parameters] == ["name"]
    assert tool("Ada") == "Hello, Ada"
    assert tool.call_json('{"name": "Ada"}').content == "Hello, Ada"
