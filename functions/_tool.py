"""``@function`` and :class:`FunctionTool`: a function plus its contract and a JSON wrapper."""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import json
from collections.abc import Callable, Coroutine
from typing import Any, Generic, ParamSpec, Self, TypeVar, cast, overload

from jsonschema import Draft202012Validator
from pydantic import ValidationError as PydanticValidationError

from ..core import UserError
from ._arguments import (
    ArgumentProblems,
    ReadArguments,
    parse_arguments,
    pydantic_problems,
    read_arguments,
    repair_values,
    schema_problems,
)
from ._build import FunctionSpec, inspect_function
from ._contract import FunctionContract, ToolResult
from ._serialize import serialize_result
from ._strict import restore_omitted

P = ParamSpec("P")
R = TypeVar("R")

_UNBOUND: Any = object()
_MAX_EXCEPTION_TEXT = 500


class _PreparedCall:
    """Validated, converted arguments ready to be passed to the function."""

    def __init__(self, args: list[Any], kwargs: dict[str, Any], read: ReadArguments) -> None:
        self.args = args
        self.kwargs = kwargs
        self.repairs = read.repairs
        self.arguments = json.dumps(read.value) if read.repairs else None


class FunctionTool(Generic[P, R]):
    """A function the model can call: the original callable, its contract and JSON wrappers.

    Calling the tool calls the function unchanged. :meth:`call_json` and :meth:`acall_json`
    take the model's argument text and always return a :class:`ToolResult`.
    """

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        strict: bool = True,
    ) -> None:
        self._fn = fn
        self._spec: FunctionSpec = inspect_function(
            fn, name=name, description=description, strict=strict
        )
        self._strict = strict
        self._schema = self._spec.contract.parameters_json_schema(strict=strict)
        Draft202012Validator.check_schema(self._schema)
        self._validator = Draft202012Validator(self._schema)
        self._receiver: Any = _UNBOUND
        functools.update_wrapper(self, fn)

    @property
    def name(self) -> str:
        """The name the model calls the function by."""
        return self._spec.contract.name

    @property
    def contract(self) -> FunctionContract:
        """What the model is told about the function."""
        return self._spec.contract

    @property
    def strict(self) -> bool:
        """Whether the tool is offered, and its arguments checked, under OpenAI strict rules."""
        return self._strict

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if self._receiver is not _UNBOUND:
            return cast(Callable[..., R], self._fn)(self._receiver, *args, **kwargs)
        return self._fn(*args, **kwargs)

    @overload
    def __get__(self, instance: None, owner: type[Any] | None = None) -> Self: ...
    @overload
    def __get__(self, instance: object, owner: type[Any] | None = None) -> FunctionTool[..., R]: ...
    def __get__(self, instance: object | None, owner: type[Any] | None = None) -> Any:
        receiver = self._spec.receiver
        if receiver == "cls":
            return self._bind(owner if owner is not None else type(instance))
        if receiver == "self" and instance is not None:
            return self._bind(instance)
        return self

    def __repr__(self) -> str:
        return f"<FunctionTool {self.name} strict={self._strict}>"

    def to_openai_tool(self) -> dict[str, Any]:
        """The Chat Completions ``tools`` entry, rendered under the tool's own ``strict``
        setting: exactly the schema :meth:`call_json` validates the model's arguments against.

        Another rendering (``tool.contract.to_openai_tool(strict=...)``) describes arguments
        this tool would check against a different schema, so it is not offered here.
        """
        return self._spec.contract.to_openai_tool(strict=self._strict)

    def call_json(self, arguments: str, *, repair: bool = True) -> ToolResult:
        """Validate the model's JSON arguments, call the function and serialize its result.

        Loose arguments that can be read only one way are repaired first (``repair=False``
        refuses them instead, for callers that are programs rather than models).

        An async function is run to completion here; inside a running event loop use
        :meth:`acall_json` instead.
        """
        self._check_arguments_type(arguments)
        if self._spec.is_async and _loop_is_running():
            raise UserError(
                f"{self.name}.call_json() cannot run the async function inside a running event "
                f"loop; use `await {self.name}.acall_json(...)`"
            )
        prepared = self._prepare(arguments, repair=repair)
        if isinstance(prepared, ToolResult):
            return prepared
        try:
            if self._spec.is_async:
                coroutine = cast(Coroutine[Any, Any, Any], self._invoke(prepared))
                value = asyncio.run(coroutine)
            else:
                value = self._invoke(prepared)
        except Exception as error:
            return self._raised(error)
        return self._result(value, prepared)

    async def acall_json(self, arguments: str, *, repair: bool = True) -> ToolResult:
        """Like :meth:`call_json`; a sync function runs in a worker thread."""
        self._check_arguments_type(arguments)
        prepared = self._prepare(arguments, repair=repair)
        if isinstance(prepared, ToolResult):
            return prepared
        try:
            if self._spec.is_async:
                value = await cast(Coroutine[Any, Any, Any], self._invoke(prepared))
            else:
                value = await asyncio.to_thread(self._invoke, prepared)
        except Exception as error:
            return self._raised(error)
        return self._result(value, prepared)

    def _bind(self, receiver: object) -> FunctionTool[..., R]:
        bound = copy.copy(self)
        bound._receiver = receiver
        return cast(FunctionTool[..., R], bound)

    def _check_arguments_type(self, arguments: object) -> None:
        if not isinstance(arguments, str):
            raise UserError(
                f"{self.name}.call_json() takes the model's arguments as a JSON string "
                f"(got {type(arguments).__name__}); pass json.dumps(arguments)"
            )

    def _prepare(self, arguments: str, *, repair: bool) -> _PreparedCall | ToolResult:
        read: ReadArguments | ArgumentProblems
        if repair:
            read = read_arguments(arguments, self._schema)
        else:
            parsed = parse_arguments(arguments, self._schema)
            read = parsed if isinstance(parsed, ArgumentProblems) else ReadArguments(parsed)
        if isinstance(read, ArgumentProblems):
            return self._refused(read)
        problems = schema_problems(self._validator, read.value)
        if problems is not None:
            repaired = repair_values(self._validator, read.value) if repair else None
            if repaired is None:
                return self._refused(problems)
            read = ReadArguments(repaired.value, [*read.repairs, *repaired.repairs])
        parsed = read.value
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        errors: dict[str, PydanticValidationError] = {}
        for binding in self._spec.bindings:
            given = binding.name in parsed
            raw = parsed.get(binding.name)
            if self._strict and given:
                # Strict mode made optional parameters nullable: null means "use the default".
                if raw is None and binding.has_default and not binding.accepts_null:
                    given = False
                else:
                    raw = restore_omitted(raw, binding.natural_schema, binding.defs)
            if given:
                try:
                    value = binding.adapter.validate_python(raw)
                except PydanticValidationError as error:
                    errors[binding.name] = error
                    continue
            elif binding.kind is inspect.Parameter.POSITIONAL_ONLY or binding.pass_default:
                value = binding.python_default()
            else:
                continue  # Python applies the signature's default
            if binding.kind is inspect.Parameter.POSITIONAL_ONLY:
                args.append(value)
            else:
                kwargs[binding.name] = value
        if errors:
            return self._refused(pydantic_problems(errors))
        return _PreparedCall(args, kwargs, read)

    def _invoke(self, prepared: _PreparedCall) -> Any:
        if self._receiver is not _UNBOUND:
            return cast(Callable[..., Any], self._fn)(
                self._receiver, *prepared.args, **prepared.kwargs
            )
        return cast(Callable[..., Any], self._fn)(*prepared.args, **prepared.kwargs)

    def _refused(self, problems: ArgumentProblems) -> ToolResult:
        return ToolResult(
            function_name=self.name,
            ok=False,
            content=problems.render(self.name),
            errors=problems.lines,
        )

    def _raised(self, error: Exception) -> ToolResult:
        text = str(error).strip()
        if len(text) > _MAX_EXCEPTION_TEXT:
            text = text[: _MAX_EXCEPTION_TEXT - 3] + "..."
        described = f"{type(error).__name__}: {text}" if text else type(error).__name__
        return self._failed(
            f"the function raised {described}. "
            f"Check the arguments and call {self.name} again, or continue without it.",
            error=described,
        )

    def _failed(self, why: str, *, error: str) -> ToolResult:
        return ToolResult(
            function_name=self.name,
            ok=False,
            content=f"Error calling {self.name}: {why}",
            errors=[f"(root): {error}"],
        )

    def _result(self, value: object, prepared: _PreparedCall) -> ToolResult:
        try:
            content = serialize_result(value)
        except TypeError as error:
            return self._failed(
                f"its result could not be turned into text ({error}). "
                "This is a fault in the function, not in the arguments.",
                error=f"result not serializable: {error}",
            )
        return ToolResult(
            function_name=self.name,
            ok=True,
            content=content,
            repairs=prepared.repairs,
            arguments=prepared.arguments,
        )


@overload
def function(fn: Callable[P, R], /) -> FunctionTool[P, R]: ...
@overload
def function(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = True,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...
def function(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = True,
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Turn a function into a :class:`FunctionTool`, bare (``@function``) or with options.

    ``name`` defaults to the function's name, ``description`` to its docstring (summary and
    extended text). ``strict`` (default ``True``) renders and checks the parameters under
    OpenAI's strict rules. Problems are reported at once, as a
    :class:`FunctionDefinitionError`.
    """
    if fn is not None:
        return FunctionTool(fn)

    def decorate(target: Callable[P, R]) -> FunctionTool[P, R]:
        return FunctionTool(target, name=name, description=description, strict=strict)

    return decorate


def _loop_is_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
