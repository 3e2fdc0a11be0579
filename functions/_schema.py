"""Small, pure helpers over JSON schemas (Draft 2020-12, as pydantic emits them).

Schemas are plain ``dict[str, Any]`` trees. Every helper returns a new tree and never
mutates its input, so a contract's stored schemas can be shared safely.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

JsonSchema = dict[str, Any]

# Keywords whose value is one subschema, a list of subschemas, or a name → subschema map.
_SINGLE_KEYWORDS = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_LIST_KEYWORDS = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAP_KEYWORDS = ("properties", "$defs", "patternProperties", "dependentSchemas")

NULL_SCHEMA: JsonSchema = {"type": "null"}
DEFS_PREFIX = "#/$defs/"


def map_subschemas(schema: JsonSchema, transform: Callable[[JsonSchema], JsonSchema]) -> JsonSchema:
    """Return a copy of ``schema`` with ``transform`` applied to each direct subschema."""
    result: JsonSchema = {}
    for key, value in schema.items():
        if key in _SINGLE_KEYWORDS and isinstance(value, dict):
            result[key] = transform(value)
        elif key in _LIST_KEYWORDS and isinstance(value, list):
            result[key] = [transform(item) if isinstance(item, dict) else item for item in value]
        elif key in _MAP_KEYWORDS and isinstance(value, dict):
            result[key] = {
                name: transform(item) if isinstance(item, dict) else item
                for name, item in value.items()
            }
        else:
            result[key] = value
    return result


def direct_subschemas(schema: JsonSchema) -> list[JsonSchema]:
    """The subschemas one level below ``schema``."""
    found: list[JsonSchema] = []

    def collect(child: JsonSchema) -> JsonSchema:
        found.append(child)
        return child

    map_subschemas(schema, collect)
    return found


def strip_titles(schema: JsonSchema) -> JsonSchema:
    """Drop pydantic's generated ``title`` keywords; descriptions carry the meaning."""
    without_title = {key: value for key, value in schema.items() if key != "title"}
    return map_subschemas(without_title, strip_titles)


def def_name(ref: str) -> str:
    """``"#/$defs/Address"`` → ``"Address"``."""
    return ref.removeprefix(DEFS_PREFIX)


def referenced_defs(schema: JsonSchema, defs: dict[str, JsonSchema]) -> dict[str, JsonSchema]:
    """The entries of ``defs`` that ``schema`` needs, following references transitively."""
    needed: dict[str, JsonSchema] = {}
    pending = [schema]
    while pending:
        node = pending.pop()
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(DEFS_PREFIX):
            name = def_name(ref)
            if name not in needed and name in defs:
                needed[name] = defs[name]
                pending.append(defs[name])
        pending.extend(direct_subschemas(node))
    return {name: needed[name] for name in sorted(needed)}


def resolve(schema: JsonSchema, defs: dict[str, JsonSchema]) -> JsonSchema:
    """Follow a local ``$ref`` (one level at a time, until a non-reference is found)."""
    seen: set[str] = set()
    while isinstance(schema.get("$ref"), str) and len(schema) == 1:
        name = def_name(schema["$ref"])
        if name in seen or name not in defs:
            break
        seen.add(name)
        schema = defs[name]
    return schema


def accepts_null(schema: JsonSchema) -> bool:
    """True when ``schema`` itself admits JSON ``null`` (``{}``, a null type, or a null branch)."""
    if not schema:
        return True
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    branches: list[Any] = schema.get("anyOf") or schema.get("oneOf") or []
    return any(isinstance(branch, dict) and accepts_null(branch) for branch in branches)


def nullable(schema: JsonSchema) -> JsonSchema:
    """``schema`` or ``null``; a description stays on the outside where readers look for it."""
    if accepts_null(schema):
        return dict(schema)
    inner = {key: value for key, value in schema.items() if key != "description"}
    wrapped: JsonSchema = {}
    if "description" in schema:
        wrapped["description"] = schema["description"]
    if list(inner) == ["anyOf"]:
        wrapped["anyOf"] = [*inner["anyOf"], NULL_SCHEMA]
    else:
        wrapped["anyOf"] = [inner, NULL_SCHEMA]
    return wrapped


def example_value(schema: JsonSchema, defs: dict[str, JsonSchema], depth: int = 0) -> Any:
    """A short plausible value for ``schema``, used to show a model what to send."""
    schema = resolve(schema, defs)
    if depth > 3:
        return None
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for keyword in ("anyOf", "oneOf"):
        branches = [b for b in schema.get(keyword, []) if isinstance(b, dict) and b != NULL_SCHEMA]
        if branches:
            return example_value(branches[0], defs, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    examples: dict[str, Any] = {"boolean": True, "integer": 0, "number": 0.0, "string": "..."}
    if kind in examples:
        return examples[kind]
    if kind == "array":
        return []
    if kind == "object" or "properties" in schema:
        return {}
    return None


def describe_shape(schema: JsonSchema) -> str:
    """A few words naming what ``schema`` accepts: ``integer``, ``Address``, ``one of [...]``."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return def_name(ref)
    if "const" in schema:
        return repr(schema["const"])
    if "enum" in schema:
        return f"one of {schema['enum']!r}"
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    return "a value matching the schema"
