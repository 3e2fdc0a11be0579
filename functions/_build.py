"""Reading a Python function, once, into a contract and the means to call it from JSON.

Parameter schemas come from pydantic (one ``TypeAdapter`` per parameter, rendered together
so that shared models share one ``$defs`` entry); descriptions come from ``Field``,
``Annotated[..., "text"]`` and the docstring, in that order of precedence. Every problem is
collected and reported at once in a :class:`FunctionDefinitionError`.
"""

from __future__ import annotations

import inspect
import re
import typing
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import PydanticSchemaGenerationError, PydanticUserError, TypeAdapter
from pydantic.errors import PydanticInvalidForJsonSchema
from pydantic.fields import FieldInfo
from pydantic.json_schema import PydanticJsonSchemaWarning
from pydantic_core import PydanticSerializationError, PydanticUndefined, to_jsonable_python

from ._contract import FunctionContract, ParameterContract
from ._docstrings import DocstringInfo, read_docstring
from ._errors import FunctionDefinitionError
from ._schema import (
    DEFS_PREFIX,
    JsonSchema,
    accepts_null,
    referenced_defs,
    strip_titles,
)

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SUPPORTED = (
    "use a JSON-compatible type: bool, int, float, str, Literal, Enum, list, tuple, set, "
    "dict, a pydantic model, a dataclass or a TypedDict"
)
_SCHEMA_ERRORS = (PydanticSchemaGenerationError, PydanticInvalidForJsonSchema, PydanticUserError)

Receiver = Literal["self", "cls"]


@dataclass(frozen=True)
class ParameterBinding:
    """How one validated JSON argument becomes the Python value the function receives."""

    name: str
    kind: inspect._ParameterKind
    adapter: TypeAdapter[Any]
    natural_schema: JsonSchema
    has_default: bool
    default: Any
    default_factory: Callable[[], Any] | None
    # The signature's default is a pydantic ``Field(...)``: Python would pass the FieldInfo
    # object itself, so the real default must be passed explicitly.
    pass_default: bool

    def python_default(self) -> Any:
        """The value the function gets when the argument is left out."""
        return self.default_factory() if self.default_factory is not None else self.default

    @property
    def accepts_null(self) -> bool:
        """Whether ``null`` is a real value of the parameter's type (not just "left out")."""
        return accepts_null(self.natural_schema)

    @property
    def defs(self) -> dict[str, JsonSchema]:
        """The ``$defs`` the parameter's natural schema refers to."""
        found: dict[str, JsonSchema] = self.natural_schema.get("$defs", {})
        return found


@dataclass(frozen=True)
class FunctionSpec:
    """Everything decoration learns about a function."""

    contract: FunctionContract
    bindings: tuple[ParameterBinding, ...]
    receiver: Receiver | None
    is_async: bool


@dataclass
class _Inspected:
    """One parameter after its annotation and default have been understood."""

    parameter: inspect.Parameter
    adapter: TypeAdapter[Any]
    description: str | None
    has_default: bool
    default: Any
    default_factory: Callable[[], Any] | None
    json_default: Any


def inspect_function(
    fn: Callable[..., Any], *, name: str | None, description: str | None, strict: bool
) -> FunctionSpec:
    """Build the contract of ``fn``.

    Raises :class:`FunctionDefinitionError` listing every problem found.
    """
    label = getattr(fn, "__qualname__", repr(fn))
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        raise FunctionDefinitionError(
            label, [f"@function expects a def or async def function (got {type(fn).__name__})"]
        )
    problems: list[str] = []
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        problems.append("generator functions cannot be tools; return a list instead of yielding")
    tool_name = name if name is not None else fn.__name__
    if not _TOOL_NAME.match(tool_name):
        problems.append(
            f"tool name {tool_name!r} is not allowed: use 1-64 letters, digits, '_' or '-' "
            "(pass name=... to @function)"
        )
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as error:  # NameError, TypeError, ...: any unresolvable annotation
        problems.append(f"cannot resolve its type annotations ({error}); import those types")
        raise FunctionDefinitionError(label, problems) from error
    try:
        docstring = read_docstring(fn)
    except ValueError as error:
        problems.append(str(error))
        docstring = DocstringInfo()

    parameters = list(inspect.signature(fn).parameters.values())
    receiver: Receiver | None = None
    if (
        not inspect.ismethod(fn)
        and parameters
        and parameters[0].name in ("self", "cls")
        and parameters[0].kind is not inspect.Parameter.KEYWORD_ONLY
    ):
        receiver = "self" if parameters[0].name == "self" else "cls"
        parameters = parameters[1:]

    inspected: list[_Inspected] = []
    for parameter in parameters:
        found = _inspect_parameter(parameter, hints, docstring, problems)
        if found is not None:
            inspected.append(found)
    names = {parameter.name for parameter in parameters}
    for documented in docstring.parameters:
        if documented.lstrip("*") not in names and documented != receiver:
            problems.append(
                f"the docstring describes parameter {documented!r}, which {fn.__name__}() does "
                "not have; fix the docstring or the signature"
            )

    returns = _inspect_return(hints, docstring, problems)
    contract = FunctionContract(
        name=tool_name,
        description=description if description is not None else docstring.description,
        parameters=_parameter_contracts(inspected),
        return_type=returns[0],
        return_description=returns[1],
        return_json_schema=returns[2],
    )
    if strict:
        problems.extend(contract.strict_problems)
    if problems:
        raise FunctionDefinitionError(label, problems)
    bindings = tuple(
        ParameterBinding(
            name=item.parameter.name,
            kind=item.parameter.kind,
            adapter=item.adapter,
            natural_schema=contract.parameters[index].json_schema,
            has_default=item.has_default,
            default=item.default,
            default_factory=item.default_factory,
            pass_default=isinstance(item.parameter.default, FieldInfo),
        )
        for index, item in enumerate(inspected)
    )
    return FunctionSpec(
        contract=contract,
        bindings=bindings,
        receiver=receiver,
        is_async=inspect.iscoroutinefunction(fn),
    )


def _inspect_parameter(
    parameter: inspect.Parameter,
    hints: dict[str, Any],
    docstring: DocstringInfo,
    problems: list[str],
) -> _Inspected | None:
    name = parameter.name
    if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
        problems.append(
            f"parameter '*{name}': *args cannot be expressed as JSON; list each parameter"
        )
        return None
    if parameter.kind is inspect.Parameter.VAR_KEYWORD:
        problems.append(
            f"parameter '**{name}': **kwargs cannot be expressed as JSON; list each parameter"
        )
        return None
    if name not in hints:
        problems.append(f"parameter {name!r} has no type annotation; annotate it ({_SUPPORTED})")
        return None
    hint = hints[name]
    base, metadata = _split_annotated(hint)
    if base is Any or base is object:
        problems.append(
            f"parameter {name!r} is annotated {_readable(base)}, which tells the model "
            f"nothing; {_SUPPORTED}"
        )
        return None

    default = parameter.default
    field_infos = [item for item in metadata if isinstance(item, FieldInfo)]
    has_default, value, factory = True, default, None
    if default is inspect.Parameter.empty:
        has_default, value = False, None
    elif isinstance(default, FieldInfo):
        field_infos.append(default)
        hint = Annotated[hint, default]
        if default.default_factory is not None:
            factory = typing.cast(Callable[[], Any], default.default_factory)
            value = None
        elif default.default is PydanticUndefined:
            has_default, value = False, None
        else:
            value = default.default

    try:
        adapter: TypeAdapter[Any] = TypeAdapter(hint)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PydanticJsonSchemaWarning)
            schema = adapter.json_schema(ref_template=DEFS_PREFIX + "{model}")
    except _SCHEMA_ERRORS as error:
        reason = str(error).splitlines()[0]
        problems.append(
            f"parameter {name!r}: type {_readable(base)} cannot be expressed as JSON schema "
            f"({reason}); {_SUPPORTED}"
        )
        return None
    if not {key for key in schema if key not in ("description", "default", "title")}:
        problems.append(
            f"parameter {name!r}: type {_readable(base)} accepts anything, which tells the "
            f"model nothing; {_SUPPORTED}"
        )
        return None

    json_default: Any = None
    if has_default:
        try:
            json_default = to_jsonable_python(factory() if factory is not None else value)
        except (PydanticSerializationError, TypeError, ValueError) as error:
            problems.append(
                f"parameter {name!r}: its default {value!r} cannot be written as JSON ({error}); "
                "use a JSON-compatible default such as None"
            )
            return None

    descriptions = [info.description for info in field_infos if info.description]
    texts = [item.strip() for item in metadata if isinstance(item, str) and item.strip()]
    description = (
        descriptions[-1]
        if descriptions
        else "\n".join(texts)
        if texts
        else docstring.parameters.get(name)
    )
    return _Inspected(
        parameter=parameter,
        adapter=adapter,
        description=description,
        has_default=has_default,
        default=value,
        default_factory=factory,
        json_default=json_default,
    )


def _parameter_contracts(inspected: list[_Inspected]) -> list[ParameterContract]:
    """Render all parameter schemas together so equal types share one ``$defs`` entry."""
    if not inspected:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PydanticJsonSchemaWarning)
        by_key, top = TypeAdapter.json_schemas(
            [(item.parameter.name, "validation", item.adapter) for item in inspected],
            ref_template=DEFS_PREFIX + "{model}",
        )
    defs = {name: strip_titles(definition) for name, definition in top.get("$defs", {}).items()}
    contracts = []
    for item in inspected:
        raw = strip_titles(by_key[(item.parameter.name, "validation")])
        schema: JsonSchema = {} if item.description is None else {"description": item.description}
        schema.update(
            (key, value) for key, value in raw.items() if key not in ("description", "default")
        )
        needed = referenced_defs(schema, defs)
        if needed:
            schema["$defs"] = needed
        contracts.append(
            ParameterContract(
                name=item.parameter.name,
                description=item.description,
                json_schema=schema,
                required=not item.has_default,
                default=item.json_default,
                has_default=item.has_default,
            )
        )
    return contracts


def _inspect_return(
    hints: dict[str, Any], docstring: DocstringInfo, problems: list[str]
) -> tuple[str, str | None, JsonSchema | None]:
    if "return" not in hints:
        return "Any", docstring.returns, None
    hint = hints["return"]
    base, metadata = _split_annotated(hint)
    texts = [item.strip() for item in metadata if isinstance(item, str) and item.strip()]
    fields = [
        item.description for item in metadata if isinstance(item, FieldInfo) and item.description
    ]
    description = fields[-1] if fields else "\n".join(texts) if texts else docstring.returns
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PydanticJsonSchemaWarning)
            schema = TypeAdapter(hint).json_schema(
                mode="serialization", ref_template=DEFS_PREFIX + "{model}"
            )
    except _SCHEMA_ERRORS as error:
        reason = str(error).splitlines()[0]
        problems.append(
            f"return type {_readable(base)} cannot be expressed as JSON ({reason}); return str "
            "or a JSON-compatible type"
        )
        return _readable(base), description, None
    return _readable(base), description, strip_titles(schema)


def _split_annotated(hint: Any) -> tuple[Any, list[Any]]:
    if get_origin(hint) is Annotated:
        base, *metadata = get_args(hint)
        return base, metadata
    return hint, []


def _readable(tp: Any) -> str:
    """``list[app.models.Address]`` → ``list[Address]``; ``NoneType`` → ``None``."""
    if tp is None or tp is type(None):
        return "None"
    if isinstance(tp, type) and get_origin(tp) is None and not get_args(tp):
        return tp.__name__
    text = re.sub(r"<class '([\w.]+)'>", r"\1", repr(tp)).replace("NoneType", "None")
    # Drop module paths, but leave quoted literal values such as Literal['a.b'] alone.
    parts = re.split(r"('[^']*')", text)
    return "".join(
        part
        if part.startswith("'")
        else re.sub(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)", r"\1", part)
        for part in parts
    )
