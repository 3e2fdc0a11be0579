"""Every supported parameter type, in strict and non-strict mode: schema, round trip, refusal.

Each case gives a JSON value that fits the type, the Python value the function must receive,
and a JSON value that does not fit with the text the error must contain.
"""

import dataclasses
import enum
import json
from collections.abc import Callable
from typing import Annotated, Any, Literal, Optional

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # pydantic needs it before Python 3.12

from sandcrew.functions import FunctionTool, function
from tests.functions.schema_rules import strict_rule_violations

NO_DEFAULT = object()


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Address(BaseModel):
    street: str
    number: int


class Item(BaseModel):
    name: str
    tags: list[str]


class Basket(BaseModel):
    owner: Address
    items: list[Item]


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


Pet = Annotated[Cat | Dog, Field(discriminator="kind")]


class TreeNode(BaseModel):
    label: str
    children: list["TreeNode"]


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Options(TypedDict):
    verbose: bool
    level: int


@dataclasses.dataclass(frozen=True)
class TypeCase:
    id: str
    annotation: Any
    good: Any
    expected: Any
    bad: Any
    bad_text: str
    default: Any = NO_DEFAULT
    strict_ok: bool = True
    check: Callable[[Any], bool] | None = None


CASES = [
    TypeCase("bool", bool, True, True, "yes", "/value: 'yes' is not of type 'boolean'"),
    TypeCase("int", int, 42, 42, 2.5, "/value: 2.5 is not of type 'integer'"),
    TypeCase("int-rejects-bool", int, 7, 7, True, "/value: True is not of type 'integer'"),
    TypeCase("float", float, 2.5, 2.5, "2.5", "/value: '2.5' is not of type 'number'"),
    TypeCase(
        "float-from-integer",
        float,
        3,
        3.0,
        None,
        "/value: None is not of type 'number'",
        check=lambda value: isinstance(value, float),
    ),
    TypeCase("str", str, "héllo", "héllo", 5, "/value: 5 is not of type 'string'"),
    TypeCase("literal", Literal["a", "b"], "b", "b", "c", "/value: 'c' is not one of ['a', 'b']"),
    TypeCase(
        "enum",
        Color,
        "blue",
        Color.BLUE,
        "green",
        "/value: 'green' is not one of ['red', 'blue']",
    ),
    TypeCase("int-enum", Priority, 2, Priority.HIGH, 3, "/value: 3 is not one of [1, 2]"),
    TypeCase(
        "optional-none",
        Optional[int],  # noqa: UP045 - this case is about the Optional spelling
        None,
        None,
        "x",
        "/value: 'x' is not of type 'integer'",
    ),
    TypeCase("x-or-none", int | None, 5, 5, "x", "/value: 'x' is not of type 'integer'"),
    TypeCase(
        "union",
        int | str,
        "seven",
        "seven",
        [1],
        "/value: [1] does not match any of: integer, string",
    ),
    TypeCase(
        "list",
        list[int],
        [1, 2, 3],
        [1, 2, 3],
        [1, "x"],
        "/value/1: 'x' is not of type 'integer'",
    ),
    TypeCase(
        "tuple-fixed",
        tuple[int, str],
        [1, "a"],
        (1, "a"),
        [1],
        "/value: [1] is too short",
    ),
    TypeCase(
        "tuple-variadic",
        tuple[float, ...],
        [1.5, 2.5],
        (1.5, 2.5),
        [1.5, "x"],
        "/value/1: 'x' is not of type 'number'",
    ),
    TypeCase(
        "set",
        set[str],
        ["a", "b"],
        {"a", "b"},
        ["a", 1],
        "/value/1: 1 is not of type 'string'",
    ),
    TypeCase(
        "dict",
        dict[str, int],
        {"a": 1},
        {"a": 1},
        {"a": "x"},
        "/value/a: 'x' is not of type 'integer'",
        strict_ok=False,
    ),
    TypeCase(
        "model",
        Address,
        {"street": "Main", "number": 3},
        Address(street="Main", number=3),
        {"street": "Main", "number": "3"},
        "/value/number: '3' is not of type 'integer'",
    ),
    TypeCase(
        "nested-model",
        Basket,
        {"owner": {"street": "Main", "number": 1}, "items": [{"name": "pen", "tags": ["x"]}]},
        Basket(owner=Address(street="Main", number=1), items=[Item(name="pen", tags=["x"])]),
        {"owner": {"street": "Main", "number": 1}, "items": [{"name": "pen", "tags": [1]}]},
        "/value/items/0/tags/0: 1 is not of type 'string'",
    ),
    TypeCase(
        "list-of-models",
        list[Address],
        [{"street": "A", "number": 1}, {"street": "B", "number": 2}],
        [Address(street="A", number=1), Address(street="B", number=2)],
        [{"street": "A", "number": 1}, {"street": "B"}],
        "/value/1/number: missing required property",
    ),
    TypeCase(
        "discriminated-union",
        Pet,
        {"kind": "dog", "good": True},
        Dog(kind="dog", good=True),
        {"kind": "dog", "good": "very"},
        "/value/good: 'very' is not of type 'boolean'",
    ),
    TypeCase(
        "recursive-model",
        TreeNode,
        {"label": "root", "children": [{"label": "leaf", "children": []}]},
        TreeNode(label="root", children=[TreeNode(label="leaf", children=[])]),
        {"label": "root", "children": [{"label": 1, "children": []}]},
        "/value/children/0/label: 1 is not of type 'string'",
    ),
    TypeCase(
        "dataclass",
        Point,
        {"x": 1, "y": 2},
        Point(1, 2),
        {"x": 1, "y": 2.5},
        "/value/y: 2.5 is not of type 'integer'",
    ),
    TypeCase(
        "typeddict",
        Options,
        {"verbose": True, "level": 3},
        {"verbose": True, "level": 3},
        {"verbose": True, "level": 3, "color": "red"},
        "/value/color: unexpected property (allowed: verbose, level)",
    ),
    TypeCase(
        "annotated-constraint",
        Annotated[int, Field(ge=0, le=10)],
        10,
        10,
        11,
        "/value: 11 is greater than the maximum of 10",
    ),
    TypeCase(
        "annotated-string-length",
        Annotated[str, Field(max_length=3)],
        "abc",
        "abc",
        "abcd",
        "/value: 'abcd' is too long",
    ),
    TypeCase(
        "default-int",
        int,
        3,
        3,
        "x",
        "/value: 'x' is not of type 'integer'",
        default=9,
    ),
]
# TypedDict rejects unknown keys only where the schema closes it: strict mode.
NON_STRICT_BAD = {"typeddict": ({"verbose": "no", "level": 3}, "/value/verbose: 'no' is not")}


def probe_for(case: TypeCase, calls: list[Any]) -> Callable[..., str]:
    def probe(value):  # type: ignore[no-untyped-def]  # annotations are attached below
        calls.append(value)
        return "received"

    probe.__annotations__ = {"value": case.annotation, "return": str}
    if case.default is not NO_DEFAULT:
        probe.__defaults__ = (case.default,)
    return probe


def modes(case: TypeCase) -> list[bool]:
    return [True, False] if case.strict_ok else [False]


PARAMS = [
    pytest.param(case, strict, id=f"{case.id}-{'strict' if strict else 'non_strict'}")
    for case in CASES
    for strict in modes(case)
]


def make_tool(case: TypeCase, strict: bool) -> tuple[FunctionTool[..., str], list[Any]]:
    calls: list[Any] = []
    return function(strict=strict)(probe_for(case, calls)), calls


@pytest.mark.parametrize(("case", "strict"), PARAMS)
def test_schema_is_valid_and_follows_the_mode(case: TypeCase, strict: bool) -> None:
    tool, _ = make_tool(case, strict)
    parameters = tool.to_openai_tool()["function"]["parameters"]
    Draft202012Validator.check_schema(parameters)
    if strict:
        assert strict_rule_violations(parameters) == []
        assert parameters["required"] == ["value"]
    else:
        assert parameters["additionalProperties"] is False
        has_default = case.default is not NO_DEFAULT
        assert parameters["required"] == ([] if has_default else ["value"])
        if has_default:
            assert parameters["properties"]["value"]["default"] == case.default


@pytest.mark.parametrize(("case", "strict"), PARAMS)
def test_good_arguments_reach_the_function_as_python_values(case: TypeCase, strict: bool) -> None:
    tool, calls = make_tool(case, strict)
    result = tool.call_json(json.dumps({"value": case.good}))
    assert result.ok, result.content
    assert result.content == "received"
    assert calls == [case.expected]
    assert type(calls[0]) is type(case.expected)
    if case.check is not None:
        assert case.check(calls[0])


@pytest.mark.parametrize(("case", "strict"), PARAMS)
async def test_good_arguments_also_work_through_the_async_wrapper(
    case: TypeCase, strict: bool
) -> None:
    tool, calls = make_tool(case, strict)
    result = await tool.acall_json(json.dumps({"value": case.good}))
    assert result.ok, result.content
    assert calls == [case.expected]


@pytest.mark.parametrize(("case", "strict"), PARAMS)
def test_bad_arguments_are_refused_without_calling(case: TypeCase, strict: bool) -> None:
    tool, calls = make_tool(case, strict)
    bad, text = (case.bad, case.bad_text)
    if not strict and case.id in NON_STRICT_BAD:
        bad, text = NON_STRICT_BAD[case.id]
    result = tool.call_json(json.dumps({"value": bad}))
    assert not result.ok
    assert calls == []
    assert result.content.startswith(f"Error calling {tool.name}: ")
    assert text in result.content
    assert any(line.startswith(text) for line in result.errors), result.errors


def test_defaulted_parameter_null_means_default_in_strict_mode() -> None:
    case = next(case for case in CASES if case.id == "default-int")
    tool, calls = make_tool(case, strict=True)
    assert tool.call_json('{"value": null}').ok
    assert calls == [9]


def test_defaulted_parameter_may_be_left_out_in_non_strict_mode() -> None:
    case = next(case for case in CASES if case.id == "default-int")
    tool, calls = make_tool(case, strict=False)
    assert tool.call_json("{}").ok
    assert calls == [9]
    refused = tool.call_json('{"value": null}')
    assert not refused.ok
    assert "/value: None is not of type 'integer'" in refused.content


def test_union_without_a_matching_branch_lists_the_choices() -> None:
    case = next(case for case in CASES if case.id == "discriminated-union")
    for strict in (True, False):
        tool, calls = make_tool(case, strict)
        result = tool.call_json('{"value": {"kind": "bird", "good": true}}')
        assert not result.ok
        assert calls == []
        assert "/value: {'kind': 'bird', 'good': True} does not match any of: Cat, Dog" in (
            result.content
        )


def test_one_of_becomes_any_of_in_strict_mode_only() -> None:
    case = next(case for case in CASES if case.id == "discriminated-union")
    natural = json.dumps(make_tool(case, strict=False)[0].to_openai_tool())
    strict = json.dumps(make_tool(case, strict=True)[0].to_openai_tool())
    assert '"oneOf"' in natural
    assert '"discriminator"' in natural
    assert '"oneOf"' not in strict
    assert '"discriminator"' not in strict
    assert '"anyOf"' in strict


def test_typed_dict_from_typing_is_refused_with_pydantic_advice() -> None:
    import typing

    class Legacy(typing.TypedDict):
        a: int

    def takes_legacy(value: Legacy) -> str:
        return "x"

    from sandcrew.functions import FunctionDefinitionError

    with pytest.raises(FunctionDefinitionError, match=r"parameter 'value'.*typing_extensions"):
        function(takes_legacy)


def test_every_listed_type_has_a_strict_and_a_non_strict_case() -> None:
    covered = {case.id for case in CASES if case.strict_ok}
    for required in ("bool", "int", "float", "str", "literal", "enum", "optional-none",
                     "x-or-none", "union", "list", "tuple-fixed", "set", "model",
                     "nested-model", "dataclass", "typeddict", "annotated-constraint",
                     "default-int"):  # fmt: skip
        assert required in covered
    assert {case.id for case in CASES if not case.strict_ok} == {"dict"}
