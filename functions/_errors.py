"""The error raised when a function cannot become a tool."""

from __future__ import annotations

from ..core import UserError


class FunctionDefinitionError(UserError):
    """A function cannot be turned into a tool; raised by ``@function`` at decoration time.

    ``problems`` lists every problem found (each naming the parameter it concerns), so one
    fix-and-retry round is enough.
    """

    def __init__(self, function_name: str, problems: list[str]) -> None:
        self.function_name = function_name
        self.problems = list(problems)
        count = "1 problem" if len(problems) == 1 else f"{len(problems)} problems"
        listing = "\n".join(f"- {problem}" for problem in problems)
        super().__init__(
            f"@function cannot make a tool from {function_name}() ({count}):\n{listing}"
        )
