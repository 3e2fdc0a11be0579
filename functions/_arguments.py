"""Reading a model's JSON arguments and explaining, in words a model can act on, what is wrong.

Every problem becomes one line that starts with the JSON pointer of the offending value
(``/items/2: 'x' is not of type 'integer'``); the message ends with the fix.

Servers that do not enforce the schema send loose arguments. What can be read in only one
way is repaired before validation, and every repair is described (``ToolResult.repairs``):
a JSON object wrapped in a code fence or followed by text; ``"true"``/``"false"`` where the
parameter is a boolean; an unknown extra argument dropped when everything else is valid.
Anything else is refused with the exact problems.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from jsonschema import Draft202012Validator, ValidationError
from pydantic import ValidationError as PydanticValidationError

from ._schema import NULL_SCHEMA, JsonSchema, describe_shape, example_value

ProblemKind = Literal["missing", "extra", "value"]
_FIXES: dict[ProblemKind, str] = {
    "missing": "all required arguments",
    "extra": "only the parameters it declares",
    "value": "values that match the parameter schema",
}
_MAX_LINE = 300


@dataclass(frozen=True)
class ArgumentProblems:
    """Why a set of arguments was refused: a summary, one line per problem, and the fix."""

    summary: str
    lines: list[str] = field(default_factory=list)
    kinds: frozenset[ProblemKind] = frozenset()
    example: str | None = None

    def render(self, function_name: str) -> str:
        """The message the model reads."""
        text = f"Error calling {function_name}: {self.summary}"
        if self.example is not None:
            return f"{text}. Send a JSON object like {self.example}."
        listing = "\n".join(self.lines)
        fixes = [_FIXES[kind] for kind in ("missing", "extra", "value") if kind in self.kinds]
        fix = ", ".join(fixes[:-1]) + (" and " if len(fixes) > 1 else "") + fixes[-1]
        return f"{text}:\n{listing}\nCall {function_name} again with {fix}."


def json_pointer(path: Iterable[str | int]) -> str:
    """RFC 6901 pointer for a path; ``""`` is the whole document."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def parse_arguments(arguments: str, schema: JsonSchema) -> dict[str, Any] | ArgumentProblems:
    """Parse the model's argument text; it must be a JSON object (blank means ``{}``)."""
    if not arguments.strip():
        return {}
    example = _example_object(schema)
    try:
        value = json.loads(arguments, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}"
        return ArgumentProblems(
            summary=f"arguments are not valid JSON ({error.msg}: {where})",
            lines=[f"(root): not valid JSON ({error.msg}: {where})"],
            example=example,
        )
    except ValueError as error:
        return ArgumentProblems(
            summary=f"arguments are not valid JSON ({error})",
            lines=[f"(root): not valid JSON ({error})"],
            example=example,
        )
    if not isinstance(value, dict):
        kind = _json_kind(value)
        return ArgumentProblems(
            summary=f"arguments must be a JSON object, not {kind}",
            lines=[f"(root): expected a JSON object, got {kind}"],
            example=example,
        )
    return value


_FENCE = re.compile(r"\A```[\w+-]*[ \t]*\n(?P<body>.*?)\n?[ \t]*```(?P<rest>.*)\Z", re.DOTALL)
_REST_SHOWN = 40


@dataclass(frozen=True)
class ReadArguments:
    """Arguments parsed from the model's text, with the repairs that made them readable."""

    value: dict[str, Any]
    repairs: list[str] = field(default_factory=list)


def read_arguments(arguments: str, schema: JsonSchema) -> ReadArguments | ArgumentProblems:
    """Like :func:`parse_arguments`, but first unwraps a code fence and drops text that
    follows a complete JSON object (saying so in ``repairs``)."""
    repairs: list[str] = []
    text = arguments.strip()
    fenced = _FENCE.match(text)
    if fenced is not None:
        text = fenced.group("body").strip()
        repairs.append("took the arguments out of a code fence")
        if fenced.group("rest").strip():
            repairs.append(f"ignored the text after the fence: {_shown(fenced.group('rest'))}")
    parsed = parse_arguments(text, schema)
    if isinstance(parsed, ArgumentProblems) and text.startswith("{"):
        try:
            value, end = json.JSONDecoder(parse_constant=_reject_constant).raw_decode(text)
        except ValueError:
            return parsed
        if not isinstance(value, dict):
            return parsed
        repairs.append(f"ignored the text after the JSON object: {_shown(text[end:])}")
        parsed = value
    if isinstance(parsed, ArgumentProblems):
        return parsed
    return ReadArguments(parsed, repairs)


def repair_values(validator: Draft202012Validator, value: dict[str, Any]) -> ReadArguments | None:
    """``value`` with its loose top-level arguments repaired, or ``None`` when no repair
    makes it valid (the caller then reports the problems of what the model sent).

    Repairs: ``"true"``/``"false"`` for a boolean parameter, and an unknown argument dropped
    when the function declares it has no others.
    """
    schema: JsonSchema = validator.schema if isinstance(validator.schema, dict) else {}
    properties: dict[str, JsonSchema] = schema.get("properties", {})
    repaired: dict[str, Any] = {}
    repairs: list[str] = []
    for name, item in value.items():
        if name not in properties:
            if schema.get("additionalProperties") is False and not schema.get("patternProperties"):
                repairs.append(f"dropped the unknown argument {name!r}")
                continue
            repaired[name] = item
            continue
        fixed = _loose_scalar(item, _accepted_types(properties[name]))
        if fixed is not _UNCHANGED:
            repairs.append(f"read {name}={json.dumps(item)} as {json.dumps(fixed)}")
            repaired[name] = fixed
        else:
            repaired[name] = item
    if not repairs or not validator.is_valid(repaired):
        return None
    return ReadArguments(repaired, repairs)


_UNCHANGED: Any = object()


def _accepted_types(schema: JsonSchema) -> set[str]:
    types: set[str] = set()
    declared = schema.get("type")
    if isinstance(declared, str):
        types.add(declared)
    elif isinstance(declared, list):
        types.update(str(kind) for kind in declared)
    for branch in schema.get("anyOf", []) + schema.get("oneOf", []):
        if isinstance(branch, dict):
            types |= _accepted_types(branch)
    return types


def _loose_scalar(item: Any, types: set[str]) -> Any:
    if not isinstance(item, str) or "string" in types:
        return _UNCHANGED
    word = item.strip()
    if "boolean" in types and word.lower() in ("true", "false"):
        return word.lower() == "true"
    return _UNCHANGED


def _shown(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= _REST_SHOWN else text[: _REST_SHOWN - 3] + "...")


def schema_problems(validator: Draft202012Validator, instance: Any) -> ArgumentProblems | None:
    """Every way ``instance`` breaks the validator's schema, or ``None`` when it is valid."""
    found: list[tuple[ProblemKind, str]] = []
    for error in validator.iter_errors(instance):
        found.extend(_describe(error))
    if not found:
        return None
    return _collect(found)


def pydantic_problems(errors: dict[str, PydanticValidationError]) -> ArgumentProblems:
    """Problems pydantic found while converting arguments (per parameter name)."""
    found: list[tuple[ProblemKind, str]] = []
    for name, error in errors.items():
        for detail in error.errors(include_url=False):
            at = json_pointer([name, *detail["loc"]])
            found.append(("value", f"{at}: {detail['msg']}"))
    return _collect(found)


def _collect(found: list[tuple[ProblemKind, str]]) -> ArgumentProblems:
    lines = list(dict.fromkeys(_shorten(line) for _, line in found))
    count = "1 problem" if len(lines) == 1 else f"{len(lines)} problems"
    return ArgumentProblems(
        summary=f"the arguments do not match its parameters ({count})",
        lines=lines,
        kinds=frozenset(kind for kind, _ in found),
    )


def _describe(error: ValidationError) -> list[tuple[ProblemKind, str]]:
    at = json_pointer(error.absolute_path)
    instance = error.instance
    keyword_value: Any = error.validator_value
    if error.validator == "required" and isinstance(instance, dict):
        return [
            ("missing", f"{at}{json_pointer([name])}: missing required property")
            for name in keyword_value
            if name not in instance
        ]
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        declared = (
            list(error.schema.get("properties", {})) if isinstance(error.schema, dict) else []
        )
        patterns = (
            error.schema.get("patternProperties", {}) if isinstance(error.schema, dict) else {}
        )
        allowed = ", ".join(declared) or "none"
        return [
            ("extra", f"{at}{json_pointer([name])}: unexpected property (allowed: {allowed})")
            for name in instance
            if name not in declared and not any(re.search(p, name) for p in patterns)
        ]
    if error.validator in ("anyOf", "oneOf") and error.context:
        branches: list[JsonSchema] = list(keyword_value)
        by_branch: dict[int, list[ValidationError]] = {}
        for sub in error.context:
            by_branch.setdefault(int(sub.relative_schema_path[0]), []).append(sub)
        # Explain the one branch the value was evidently meant for: the only non-null one,
        # or the only one whose discriminating constant (e.g. "kind": "dog") matched.
        real = [index for index, branch in enumerate(branches) if branch != NULL_SCHEMA]
        if len(real) > 1:
            real = [i for i in real if all(e.validator != "const" for e in by_branch.get(i, []))]
        if len(real) == 1 and by_branch.get(real[0]):
            return [line for sub in by_branch[real[0]] for line in _describe(sub)]
        shapes = ", ".join(describe_shape(branch) for branch in branches)
        return [("value", f"{at or '(root)'}: {instance!r} does not match any of: {shapes}")]
    return [("value", f"{at or '(root)'}: {error.message}")]


def _example_object(schema: JsonSchema) -> str:
    properties: dict[str, JsonSchema] = schema.get("properties", {})
    if not properties:
        return "{}"
    first, first_schema = next(iter(properties.items()))
    value = example_value(first_schema, schema.get("$defs", {}))
    more = ", ..." if len(properties) > 1 else ""
    return f"{{{json.dumps(first)}: {json.dumps(value, ensure_ascii=False)}{more}}}"


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, str):
        return "a JSON string"
    if isinstance(value, bool):
        return f"the JSON literal {json.dumps(value)}"
    if value is None:
        return "JSON null"
    return "a JSON number"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _shorten(line: str) -> str:
    return line if len(line) <= _MAX_LINE else line[: _MAX_LINE - 3] + "..."
