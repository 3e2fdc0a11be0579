"""OpenAI strict mode ("structured outputs") for parameter schemas, and the way back.

Strict mode accepts a subset of JSON schema: every object closes with
``additionalProperties: false`` and lists every property in ``required``; optional values
become nullable instead of omittable; ``oneOf`` and ``default`` are not allowed; maps with
arbitrary keys cannot be expressed. :func:`to_strict` rewrites a natural (pydantic) schema
into that subset and reports what cannot be rewritten. :func:`restore_omitted` undoes the
"optional becomes nullable" step on incoming arguments, so a ``null`` sent for a property
that only became nullable for strict mode means "not given" and the Python default applies.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from ._schema import (
    JsonSchema,
    accepts_null,
    def_name,
    nullable,
    resolve,
)

# Keywords strict mode rejects, which we can drop without changing what Python accepts:
# defaults are restored on the way back, sets de-duplicate themselves, and discriminators
# are an OpenAPI hint that ``anyOf`` does not need.
_DROPPED_KEYWORDS = frozenset({"default", "discriminator", "uniqueItems"})
_OPEN_MAP_ADVICE = (
    "strict mode needs every key declared in advance; use a pydantic model, dataclass or "
    "TypedDict with fixed fields (or a list of key/value objects), or pass strict=False to "
    "@function"
)


def to_strict(schema: JsonSchema, *, where: str) -> tuple[JsonSchema, list[str]]:
    """Rewrite a self-contained schema (``$defs`` inside) to strict rules.

    Returns the rewritten schema and the problems that make it inexpressible, each naming
    its location starting with ``where`` (for example ``settings.extra``).
    """
    defs: dict[str, JsonSchema] = schema.get("$defs", {})
    problems: list[str] = []
    body = {key: value for key, value in schema.items() if key != "$defs"}
    result = _strict_node(body, where, defs, problems)
    if defs:
        result["$defs"] = {
            name: _strict_node(definition, name, defs, problems)
            for name, definition in defs.items()
        }
    return result, problems


def _strict_node(
    node: JsonSchema, path: str, defs: dict[str, JsonSchema], problems: list[str]
) -> JsonSchema:
    node = {key: value for key, value in node.items() if key not in _DROPPED_KEYWORDS}
    if "oneOf" in node:
        branches = node.pop("oneOf")
        if "anyOf" in node:
            node["allOf"] = [*node.get("allOf", []), {"anyOf": branches}]
        else:
            node["anyOf"] = branches
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1 and def_name(ref) in defs:
        # Strict mode ignores keywords beside "$ref", so inline the target to keep them.
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        return _strict_node({**defs[def_name(ref)], **siblings}, path, defs, problems)
    if set(node) <= {"description"}:
        problems.append(
            f"{path} accepts any JSON value, which strict mode cannot express; give it a "
            "concrete type"
        )
        return node
    if node.get("type") == "object" or "properties" in node:
        _close_object(node, path, defs, problems)
    for key, value in list(node.items()):
        if key in ("items", "contains", "not") and isinstance(value, dict):
            node[key] = _strict_node(value, f"{path}[]", defs, problems)
        elif key in ("anyOf", "allOf") and isinstance(value, list):
            node[key] = [_strict_node(branch, path, defs, problems) for branch in value]
        elif key == "prefixItems" and isinstance(value, list):
            node[key] = [
                _strict_node(item, f"{path}[{index}]", defs, problems)
                for index, item in enumerate(value)
            ]
    return node


def _close_object(
    node: JsonSchema, path: str, defs: dict[str, JsonSchema], problems: list[str]
) -> None:
    extra = node.get("additionalProperties")
    open_extra = extra is not None and extra is not False
    if open_extra or "patternProperties" in node or ("properties" not in node and extra is None):
        problems.append(f"{path} is an open map (dict[str, ...]): {_OPEN_MAP_ADVICE}")
        return
    properties: dict[str, JsonSchema] = node.get("properties", {})
    required = set(node.get("required", []))
    node["properties"] = {
        name: _strict_node(
            sub if name in required else nullable(sub), f"{path}.{name}", defs, problems
        )
        for name, sub in properties.items()
    }
    node["required"] = list(properties)
    node["additionalProperties"] = False


def restore_omitted(value: Any, schema: JsonSchema, defs: dict[str, JsonSchema]) -> Any:
    """Remove ``null`` values that strict mode forced on optional, non-nullable properties.

    ``schema`` is the natural (non-strict) schema of ``value``; only properties that are
    optional there and do not admit ``null`` lose their ``null``, so the Python default
    (of the model field, dataclass field or TypedDict key) applies.
    """
    if not isinstance(value, dict | list):
        return value
    schema = resolve(schema, defs)
    ref = schema.get("$ref")
    if isinstance(ref, str) and def_name(ref) in defs:
        schema = {**defs[def_name(ref)], **{k: v for k, v in schema.items() if k != "$ref"}}
    branches = schema.get("anyOf", schema.get("oneOf"))
    if isinstance(branches, list):
        for branch in branches:
            candidate = restore_omitted(value, branch, defs)
            if Draft202012Validator({**branch, "$defs": defs}).is_valid(candidate):
                return candidate
        return value
    if isinstance(value, dict):
        return _restore_object(value, schema, defs)
    prefix = schema.get("prefixItems")
    items = schema.get("items")
    restored: list[Any] = []
    for index, item in enumerate(value):
        sub = prefix[index] if isinstance(prefix, list) and index < len(prefix) else items
        restored.append(restore_omitted(item, sub, defs) if isinstance(sub, dict) else item)
    return restored


def _restore_object(
    value: dict[str, Any], schema: JsonSchema, defs: dict[str, JsonSchema]
) -> dict[str, Any]:
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            return {key: restore_omitted(item, extra, defs) for key, item in value.items()}
        return value
    required = set(schema.get("required", []))
    restored: dict[str, Any] = {}
    for key, item in value.items():
        sub = properties.get(key)
        if sub is None:
            restored[key] = item
        elif item is None and key not in required and not accepts_null(resolve(sub, defs)):
            continue
        else:
            restored[key] = restore_omitted(item, sub, defs)
    return restored
