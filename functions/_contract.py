"""The data a model sees: function and parameter contracts, and the result of a call."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from ..core import UserError
from ._schema import JsonSchema, nullable, referenced_defs
from ._strict import to_strict


class ParameterContract(BaseModel):
    """One parameter as the model sees it.

    ``json_schema`` is self-contained: the natural (non-strict) schema of the parameter's
    type with its description, plus the ``$defs`` it references. ``default`` is the
    JSON form of the Python default and means something only when ``has_default`` is true.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    description: str | None = None
    json_schema: JsonSchema
    required: bool
    default: Any = None
    has_default: bool = False

    @model_validator(mode="after")
    def _required_iff_no_default(self) -> ParameterContract:
        if self.required == self.has_default:
            raise ValueError(
                f"parameter {self.name!r}: required must be the opposite of has_default "
                f"(got required={self.required}, has_default={self.has_default})"
            )
        return self


class FunctionContract(BaseModel):
    """What a model needs to call a function: its name, description and parameters.

    Both renderings of the parameters (strict and non-strict) are computed once, when the
    contract is created; the methods hand out copies.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    parameters: list[ParameterContract] = Field(default_factory=list)
    return_type: str
    return_description: str | None = None
    return_json_schema: JsonSchema | None = None

    _schemas: dict[bool, JsonSchema] = PrivateAttr(default_factory=dict)
    _strict_problems: list[str] = PrivateAttr(default_factory=list)

    def model_post_init(self, context: Any, /) -> None:
        names = [parameter.name for parameter in self.parameters]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"parameter names must be unique (repeated: {', '.join(duplicates)})")
        self._schemas[False] = _assemble(self.parameters, strict=False)[0]
        strict_schema, problems = _assemble(self.parameters, strict=True)
        self._schemas[True] = strict_schema
        self._strict_problems.extend(problems)

    @property
    def strict_problems(self) -> list[str]:
        """Why this contract cannot be rendered in strict mode (empty when it can)."""
        return list(self._strict_problems)

    def parameters_json_schema(self, *, strict: bool) -> JsonSchema:
        """The JSON schema of the arguments object, following OpenAI's strict rules if asked."""
        if strict and self._strict_problems:
            listing = "; ".join(self._strict_problems)
            raise UserError(
                f"{self.name}() cannot be rendered in strict mode: {listing}. "
                "Render it with strict=False or change the parameter types."
            )
        return copy.deepcopy(self._schemas[strict])

    def to_openai_tool(self, *, strict: bool) -> dict[str, Any]:
        """The Chat Completions ``tools`` entry for this function."""
        definition: dict[str, Any] = {"name": self.name}
        if self.description:
            definition["description"] = self.description
        definition["parameters"] = self.parameters_json_schema(strict=strict)
        if strict:
            definition["strict"] = True
        return {"type": "function", "function": definition}


class ToolResult(BaseModel):
    """The outcome of calling a tool with a model's arguments.

    ``content`` is the text to give back to the model: the serialized result when ``ok``,
    otherwise a short explanation naming the function, the problem and the fix.
    ``errors`` has one line per problem (with its JSON-pointer path) and is empty when ok.
    ``repairs`` says how loose arguments were read (a code fence removed, ``"true"`` read as
    ``true`` …); ``arguments`` is then the JSON text that was actually used.
    """

    model_config = ConfigDict(frozen=True)

    function_name: str
    ok: bool
    content: str
    errors: list[str] = Field(default_factory=list)
    repairs: list[str] = Field(default_factory=list)
    arguments: str | None = None


def _assemble(parameters: list[ParameterContract], *, strict: bool) -> tuple[JsonSchema, list[str]]:
    properties: dict[str, JsonSchema] = {}
    defs: dict[str, JsonSchema] = {}
    problems: list[str] = []
    for parameter in parameters:
        schema = dict(parameter.json_schema)
        own_defs: dict[str, JsonSchema] = schema.pop("$defs", {})
        if strict:
            if parameter.has_default:
                schema = nullable(schema)
            schema, found = to_strict({**schema, "$defs": own_defs}, where=parameter.name)
            own_defs = schema.pop("$defs", {})
            problems.extend(f"parameter {parameter.name!r}: {problem}" for problem in found)
        elif parameter.has_default:
            schema["default"] = parameter.default
        for name, definition in own_defs.items():
            if defs.setdefault(name, definition) != definition:
                raise UserError(
                    f"parameters define two different schemas named {name!r} in $defs; "
                    "give the types distinct names"
                )
        properties[parameter.name] = schema
    required = [p.name for p in parameters if strict or p.required]
    result: JsonSchema = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    # Strict mode inlines some references; keep only the definitions still referred to.
    used = referenced_defs({"properties": properties}, defs)
    if used:
        result["$defs"] = used
    return result, problems
