"""Independent checks of emitted schemas, and a tiny generator of arguments that fit them."""

from typing import Any

from jsonschema import Draft202012Validator

from sandcrew.functions._schema import JsonSchema

_CHILD_LISTS = ("anyOf", "allOf", "prefixItems")
_CHILD_MAPS = ("properties", "$defs")


def children(schema: JsonSchema, path: str) -> list[tuple[str, JsonSchema]]:
    found: list[tuple[str, JsonSchema]] = []
    for key in ("items", "additionalProperties", "not", "contains"):
        if isinstance(schema.get(key), dict):
            found.append((f"{path}/{key}", schema[key]))
    for key in _CHILD_LISTS:
        for index, child in enumerate(schema.get(key, [])):
            found.append((f"{path}/{key}/{index}", child))
    for key in _CHILD_MAPS:
        for name, child in schema.get(key, {}).items():
            found.append((f"{path}/{key}/{name}", child))
    return found


def strict_rule_violations(schema: JsonSchema, path: str = "#") -> list[str]:
    """Where ``schema`` breaks OpenAI's strict rules (empty when it follows them)."""
    problems = []
    for forbidden in ("oneOf", "default", "discriminator", "uniqueItems", "patternProperties"):
        if forbidden in schema:
            problems.append(f"{path}: has {forbidden}")
    if "$ref" in schema and len(schema) > 1:
        problems.append(f"{path}: $ref with sibling keywords {sorted(schema)}")
    if schema.get("type") == "object" or "properties" in schema:
        if schema.get("additionalProperties") is not False:
            problems.append(f"{path}: additionalProperties is not false")
        if sorted(schema.get("required", [])) != sorted(schema.get("properties", {})):
            problems.append(f"{path}: not every property is required")
    if not schema or set(schema) <= {"description"}:
        problems.append(f"{path}: accepts anything")
    for child_path, child in children(schema, path):
        problems.extend(strict_rule_violations(child, child_path))
    return problems


def minimal_instance(schema: JsonSchema, defs: dict[str, JsonSchema] | None = None) -> Any:
    """A value satisfying ``schema``: every required property, the smallest legal values."""
    defs = schema.get("$defs", defs or {})
    if "$ref" in schema:
        target = defs[schema["$ref"].removeprefix("#/$defs/")]
        return minimal_instance(
            {**target, **{k: v for k, v in schema.items() if k != "$ref"}}, defs
        )
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        return minimal_instance(schema["anyOf"][0], defs)
    kind = schema.get("type")
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "string":
        if schema.get("pattern") == r"^[A-Z]{3}-\d{3}$":
            return "ABC-123"
        return "x" * max(schema.get("minLength", 1), 1)
    if kind == "array":
        if "prefixItems" in schema:
            return [minimal_instance(item, defs) for item in schema["prefixItems"]]
        count = schema.get("minItems", 1)
        return [minimal_instance(schema.get("items", {"type": "string"}), defs)] * count
    if kind == "object" or "properties" in schema:
        required = schema.get("required", [])
        return {name: minimal_instance(schema["properties"][name], defs) for name in required}
    raise AssertionError(f"no generator for {schema}")


def is_valid(schema: JsonSchema, instance: Any) -> bool:
    return Draft202012Validator(schema).is_valid(instance)
