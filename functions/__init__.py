"""Function contracts: turn a typed Python function into a tool a model can call.

``@function`` reads a function once, at decoration time, into a :class:`FunctionContract`
(name, description, parameter JSON schemas, return type) and wraps it in a
:class:`FunctionTool` that renders the OpenAI tool definition and calls the function from
the model's JSON arguments, returning a :class:`ToolResult` instead of raising on bad input.
"""

from ._contract import FunctionContract, ParameterContract, ToolResult
from ._errors import FunctionDefinitionError
from ._tool import FunctionTool, function

__all__ = [
    "FunctionContract",
    "FunctionDefinitionError",
    "FunctionTool",
    "ParameterContract",
    "ToolResult",
    "function",
]
