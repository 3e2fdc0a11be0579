"""Function-call middleware: gives a model typed functions and runs the calls it makes.

* The functions' tool definitions are added to the reply options.
* When the model answers with tool calls, each is run through the function's validating
  wrapper (``FunctionTool.acall_json``, which never raises for bad input) and the reply
  becomes an :class:`AggregateMessage` of the calls and their results.
* A call to an unknown function gets the result "Function X is not available; available
  functions are: a, b".
* If the last incoming message is a pending :class:`ToolCallMessage` from someone else, it
  is executed without calling the model (AutoGen.NET's behaviour).

Required-call policy (``required=True``): when the model makes no call, or any call has
invalid arguments or names an unknown function, it is asked again — the original messages
plus a user message with the exact problems — up to ``max_attempts`` attempts in all.
``tool_choice`` escalates: the first attempt uses the caller's choice (default ``"auto"``);
later attempts force the function by name (one function) or ``"required"`` (several). When
the attempts run out, :class:`FunctionCallRequiredError` carries every attempt.
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

if TYPE_CHECKING:
    from ..functions import FunctionTool


@dataclass(frozen=True)
class FunctionCallAttempt:
    """One try of the required-call policy: the model's reply and what was wrong with it."""

    reply: Message
    errors: list[str]


class FunctionCallRequiredError(ModelBehaviorError):
    """The model did not make a valid call to the required function(s) in time."""

    def __init__(self, message: str, attempts: Sequence[FunctionCallAttempt]) -> None:
        super().__init__(message)
        self.attempts = list(attempts)


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
            reply = await agent.generate_reply(messages, options)
            if isinstance(reply, ToolCallMessage):
                aggregate, _ = await self._aggregate(reply, agent.name, reply.usage)
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
        feedback: str | None = None
        for number in range(1, self.max_attempts + 1):
            tool_choice = options.tool_choice or "auto"
            if number > 1:
                tool_choice = self._forced_choice()
            prompt = list(messages)
            if feedback is not None:
                prompt.append(TextMessage(role="user", content=feedback))
            reply = await agent.generate_reply(
                prompt, options.model_copy(update={"tool_choice": tool_choice})
            )
            usage = add_usage(usage, reply.usage)
            if not isinstance(reply, ToolCallMessage):
                errors = [self._must_call_text()]
                attempts.append(FunctionCallAttempt(reply, errors))
                feedback = errors[0]
                continue
            aggregate, problems = await self._aggregate(reply, agent.name, usage)
            if not problems:
                return aggregate
            errors = [f"{call.name}: {problem}" for call, problem in problems]
            attempts.append(FunctionCallAttempt(aggregate, errors))
            feedback = self._fix_arguments_text(problems)
        summary = "; ".join(
            f"attempt {index}: {' | '.join(attempt.errors)}"
            for index, attempt in enumerate(attempts, start=1)
        )
        raise FunctionCallRequiredError(
            f"agent {agent.name!r} did not make a valid call to "
            f"{' or '.join(self.function_names)} in {self.max_attempts} attempt(s): {summary}",
            attempts,
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
        self, reply: ToolCallMessage, sender: str, usage: Usage | None
    ) -> tuple[AggregateMessage, list[tuple[ToolCall, str]]]:
        """Run every call; also return each failed call with its exact problems."""
        results: list[ToolCallResult] = []
        problems: list[tuple[ToolCall, str]] = []
        for call in reply.tool_calls:
            result, errors = await self._execute(call)
            results.append(result)
            if not result.ok:
                problems.append((call, "; ".join(errors) or result.content))
        aggregate = AggregateMessage(
            tool_calls=reply.tool_calls,
            results=results,
            text=reply.text,
            sender=reply.sender or sender,
            usage=usage,
        )
        return aggregate, problems

    async def _execute(self, call: ToolCall) -> tuple[ToolCallResult, list[str]]:
        tool = self.functions.get(call.name)
        if tool is None:
            available = ", ".join(self.function_names)
            text = f"Function {call.name} is not available; available functions are: {available}"
            return ToolCallResult(id=call.id, name=call.name, content=text, ok=False), [text]
        result = await tool.acall_json(call.arguments)
        outcome = ToolCallResult(id=call.id, name=call.name, content=result.content, ok=result.ok)
        return outcome, list(result.errors)


def _tool_name(tool: dict[str, Any]) -> str | None:
    function = tool.get("function")
    if isinstance(function, dict):
        name = function.get("name")
        return name if isinstance(name, str) else None
    return None
