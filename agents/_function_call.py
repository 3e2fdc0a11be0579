"""Function-call middleware: gives a model typed functions and runs the calls it makes.

* The functions' tool definitions are added to the reply options.
* When the model answers with tool calls, each is run through the function's validating
  wrapper (``FunctionTool.acall_json``, which never raises for bad input) and the reply
  becomes an :class:`AggregateMessage` of the calls and their results.
* A call to an unknown function gets the result "Function X is not available; available
  functions are: a, b".
* If the last incoming message is a pending :class:`ToolCallMessage` from someone else, it
  is executed without calling the model (AutoGen.NET's behaviour).

Loose arguments that can be read only one way are repaired by the function's wrapper (a
code fence, ``"true"`` for ``true`` …); the call is then recorded with the arguments actually
used, and the repair is described in the reply's ``notes``.

Required-call policy (``required=True``): when the model makes no call (an empty reply
included), or any call has invalid arguments or names an unknown function, or it calls one
function several times with different arguments (ambiguous: no call is taken), it is asked
again — the original messages plus a user message with the exact problems — up to
``max_attempts`` attempts in all. ``tool_choice``: with one function it is forced by name
from the first attempt (local servers often answer ``"auto"`` with nothing); with several,
the first attempt uses the caller's choice (default ``"auto"``) and later ones
``"required"``. A forced choice answered with an empty reply (as some servers do) is followed
by an ``"auto"`` attempt. When the attempts run out, :class:`FunctionCallRequiredError`
carries every attempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core import ModelBehaviorError, UserError
from ._agent import Agent, GenerateReplyOptions, ToolChoice
from ._messages import (
    AggregateMessage,
    Message,
    TextMessage,
    ToolCall,
    ToolCallMessage,
    ToolCallResult,
    ToolResultMessage,
    Usage,
    add_usage,
)
from ._model_errors import EmptyReplyError
from ._tool_text import canonical_arguments

if TYPE_CHECKING:
    from ..functions import FunctionTool


@dataclass(frozen=True)
class FunctionCallAttempt:
    """One try of the required-call policy: the model's reply and what was wrong with it."""

    reply: Message
    errors: list[str]


class FunctionCallRequiredError(ModelBehaviorError):
    """The model did not make a valid call to the required function(s) in time; ``usage``
    is what the attempts cost."""

    def __init__(
        self,
        message: str,
        attempts: Sequence[FunctionCallAttempt],
        *,
        usage: Usage | None = None,
    ) -> None:
        super().__init__(message)
        self.attempts = list(attempts)
        self.usage = usage

    @property
    def made_no_call(self) -> bool:
        """No attempt called anything (empty or text replies only)."""
        return all(
            not isinstance(a.reply, ToolCallMessage | AggregateMessage) for a in self.attempts
        )


class FunctionCallMiddleware:
    """Attach ``functions`` to a model agent and execute the calls it makes (see module doc)."""

    name = "function_call"

    def __init__(
        self,
        functions: Sequence[FunctionTool[..., Any]],
        *,
        required: bool = False,
        max_attempts: int = 3,
    ) -> None:
        problems: list[str] = []
        if not functions:
            problems.append("functions must not be empty")
        names = [tool.name for tool in functions]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            problems.append(f"function names must be unique (repeated: {', '.join(duplicates)})")
        if max_attempts < 1:
            problems.append(f"max_attempts must be >= 1 (got {max_attempts})")
        if problems:
            raise UserError("FunctionCallMiddleware: " + "; ".join(problems))
        self.functions = {tool.name: tool for tool in functions}
        self.required = required
        self.max_attempts = max_attempts

    @property
    def function_names(self) -> list[str]:
        return list(self.functions)

    async def __call__(
        self, messages: Sequence[Message], options: GenerateReplyOptions, agent: Agent
    ) -> Message:
        if messages:
            last = messages[-1]
            if isinstance(last, ToolCallMessage) and last.sender != agent.name:
                results = [(await self._execute(call))[0] for call in last.tool_calls]
                return ToolResultMessage(results=results, sender=agent.name)

        options = self._with_tools(options)
        if not self.required:
            try:
                reply = await agent.generate_reply(messages, options)
            except EmptyReplyError as error:
                # Once more; an empty reply from a local server is often a fluke.
                reply = await agent.generate_reply(messages, options)
                reply = reply.model_copy(
                    update={
                        "usage": add_usage(error.usage, reply.usage),
                        "notes": [*error.notes, *reply.notes],
                    }
                )
            if isinstance(reply, ToolCallMessage):
                aggregate, _ = await self._aggregate(reply, agent.name, reply.usage, [])
                return aggregate
            return reply
        return await self._required_call(messages, options, agent)

    def _with_tools(self, options: GenerateReplyOptions) -> GenerateReplyOptions:
        ours = [tool.to_openai_tool() for tool in self.functions.values()]
        existing = [tool for tool in options.tools or [] if _tool_name(tool) not in self.functions]
        return options.model_copy(update={"tools": [*existing, *ours]})

    async def _required_call(
        self, messages: Sequence[Message], options: GenerateReplyOptions, agent: Agent
    ) -> Message:
        attempts: list[FunctionCallAttempt] = []
        usage: Usage | None = None
        notes: list[str] = []
        feedback: str | None = None
        tool_choice: ToolChoice = options.tool_choice or (
            self._forced_choice() if len(self.functions) == 1 else "auto"
        )
        for number in range(1, self.max_attempts + 1):
            prompt = list(messages)
            if feedback is not None:
                prompt.append(TextMessage(role="user", content=feedback))
            asked = tool_choice
            try:
                reply = await agent.generate_reply(
                    prompt, options.model_copy(update={"tool_choice": asked})
                )
            except EmptyReplyError as error:
                usage = add_usage(usage, error.usage)
                reply = TextMessage(content="", sender=agent.name, usage=error.usage)
                errors = [f"empty reply (tool_choice {_choice_text(asked)})"]
                attempts.append(FunctionCallAttempt(reply, errors))
                notes.append(f"attempt {number}: {errors[0]}")
                feedback = self._must_call_text()
                # Some servers answer a forced choice with nothing: let the model choose.
                tool_choice = "auto" if isinstance(asked, dict) else self._forced_choice()
                continue
            usage = add_usage(usage, reply.usage)
            notes.extend(reply.notes)
            tool_choice = self._forced_choice()
            if not isinstance(reply, ToolCallMessage):
                errors = [self._must_call_text()]
                attempts.append(FunctionCallAttempt(reply, errors))
                notes.append(f"attempt {number}: no call ({_shown(reply.content)})")
                feedback = errors[0]
                continue
            ambiguous = _disagreeing_calls(reply.tool_calls)
            if ambiguous:
                errors = [
                    f"{name}: called {count} times with different arguments; which one is "
                    "meant is ambiguous, so none was taken"
                    for name, count in ambiguous.items()
                ]
                attempts.append(FunctionCallAttempt(reply, errors))
                notes.append(f"attempt {number}: {' | '.join(errors)}")
                feedback = (
                    "Your calls disagree: "
                    + "; ".join(errors)
                    + ". Make exactly one call with your final answer."
                )
                continue
            aggregate, problems = await self._aggregate(reply, agent.name, usage, notes)
            if not problems:
                return aggregate
            errors = [f"{call.name}: {problem}" for call, problem in problems]
            attempts.append(FunctionCallAttempt(aggregate, errors))
            notes.append(f"attempt {number}: {' | '.join(errors)}")
            feedback = self._fix_arguments_text(problems)
        summary = "; ".join(
            f"attempt {index}: {' | '.join(attempt.errors)}"
            for index, attempt in enumerate(attempts, start=1)
        )
        raise FunctionCallRequiredError(
            f"agent {agent.name!r} did not make a valid call to "
            f"{' or '.join(self.function_names)} in {self.max_attempts} attempt(s): {summary}",
            attempts,
            usage=usage,
        )

    def _forced_choice(self) -> ToolChoice:
        if len(self.functions) == 1:
            return {"type": "function", "function": {"name": self.function_names[0]}}
        return "required"

    def _must_call_text(self) -> str:
        if len(self.functions) == 1:
            return f"You must call function {self.function_names[0]}."
        return f"You must call one of the functions: {', '.join(self.function_names)}."

    def _fix_arguments_text(self, problems: Sequence[tuple[ToolCall, str]]) -> str:
        lines = ["Your function call was not valid. Fix these problems and call again:"]
        lines.extend(f"- {call.name}({call.arguments}): {problem}" for call, problem in problems)
        return "\n".join(lines)

    async def _aggregate(
        self, reply: ToolCallMessage, sender: str, usage: Usage | None, notes: list[str]
    ) -> tuple[AggregateMessage, list[tuple[ToolCall, str]]]:
        """Run every call; also return each failed call with its exact problems."""
        calls: list[ToolCall] = []
        results: list[ToolCallResult] = []
        problems: list[tuple[ToolCall, str]] = []
        repairs: list[str] = []
        for call in reply.tool_calls:
            result, errors, used = await self._execute(call)
            if used.arguments != call.arguments:
                repairs.append(f"repaired the call to {call.name}: {'; '.join(errors)}")
                errors = []
            calls.append(used)
            results.append(result)
            if not result.ok:
                problems.append((call, "; ".join(errors) or result.content))
        aggregate = AggregateMessage(
            tool_calls=calls,
            results=results,
            text=reply.text,
            sender=reply.sender or sender,
            usage=usage,
            notes=list(dict.fromkeys([*notes, *reply.notes, *repairs])),
        )
        return aggregate, problems

    async def _execute(self, call: ToolCall) -> tuple[ToolCallResult, list[str], ToolCall]:
        """The result, its problems (or, for a repaired call, its repairs) and the call as
        it was made (with the repaired arguments)."""
        tool = self.functions.get(call.name)
        if tool is None:
            available = ", ".join(self.function_names)
            text = f"Function {call.name} is not available; available functions are: {available}"
            return ToolCallResult(id=call.id, name=call.name, content=text, ok=False), [text], call
        result = await tool.acall_json(call.arguments)
        outcome = ToolCallResult(id=call.id, name=call.name, content=result.content, ok=result.ok)
        if result.ok and result.arguments is not None:
            used = call.model_copy(update={"arguments": result.arguments})
            return outcome, list(result.repairs), used
        return outcome, list(result.errors), call


def _disagreeing_calls(calls: Sequence[ToolCall]) -> dict[str, int]:
    """Functions called more than once with different arguments, with their call counts."""
    seen: dict[str, set[str]] = {}
    for call in calls:
        seen.setdefault(call.name, set()).add(canonical_arguments(call.arguments))
    return {name: len(variants) for name, variants in seen.items() if len(variants) > 1}


def _choice_text(choice: ToolChoice) -> str:
    if isinstance(choice, dict):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        return f"forcing {name}"
    return repr(choice)


def _shown(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _tool_name(tool: dict[str, Any]) -> str | None:
    function = tool.get("function")
    if isinstance(function, dict):
        name = function.get("name")
        return name if isinstance(name, str) else None
    return None
