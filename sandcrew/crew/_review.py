"""The reviewer's typed function and how its answer becomes a verdict.

The model reviews the coder's message by calling ``review_code_block``; the
facts that the code itself proves (how many blocks, which language, whether it
parses) override what the model claimed, so code that does not parse is never
approved.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from sandcrew.agents import (
    Agent,
    AggregateMessage,
    GenerateReplyOptions,
    Message,
    TextMessage,
    ToolCall,
)
from sandcrew.crew._code_facts import CodeFacts, inspect_code
from sandcrew.errors import ModelBehaviorError
from sandcrew.functions import function

APPROVAL_TEXT = "The code looks good, please ask runner to run the code for you."
COMMENTS_HEADLINE = "There're some comments from code reviewer, please fix these comments"


class ReviewClaims(BaseModel):
    """The four checks as the model answered them."""

    model_config = ConfigDict(frozen=True)

    has_multiple_code_blocks: bool
    is_top_level_statement: bool
    is_python_code_block: bool
    is_print_result_to_console: bool


@function
def review_code_block(
    has_multiple_code_blocks: bool,
    is_top_level_statement: bool,
    is_python_code_block: bool,
    is_print_result_to_console: bool,
) -> ReviewClaims:
    """Review the code block in the coder's last message.

    Args:
        has_multiple_code_blocks: True when the message contains more than one code block.
        is_top_level_statement: True when the code is a top-level script, not wrapped in a
            class or a main function that is never called.
        is_python_code_block: True when the code block is tagged python (or bash for a shell task).
        is_print_result_to_console: True when the code prints its result to the console.
    """
    return ReviewClaims(
        has_multiple_code_blocks=has_multiple_code_blocks,
        is_top_level_statement=is_top_level_statement,
        is_python_code_block=is_python_code_block,
        is_print_result_to_console=is_print_result_to_console,
    )


class ReviewVerdict(BaseModel):
    """The reviewer's structured verdict, attached to its message as ``data``."""

    model_config = ConfigDict(frozen=True)

    kind: str = "review"
    approved: bool
    comments: list[str]
    claims: ReviewClaims
    facts: CodeFacts

    def to_text(self) -> str:
        if self.approved:
            return APPROVAL_TEXT
        return "\n".join([COMMENTS_HEADLINE, *(f"- {comment}" for comment in self.comments)])


def claims_from_arguments(arguments: str) -> ReviewClaims:
    """Parse the arguments of a valid ``review_code_block`` call."""
    return ReviewClaims.model_validate(json.loads(arguments or "{}"))


def decide(claims: ReviewClaims, facts: CodeFacts) -> ReviewVerdict:
    """Merge the model's claims with the proven facts into one verdict.

    Block count, language and syntax come from the code; the top-level and
    printing checks take the model's word unless the code proves otherwise.
    """
    comments: list[str] = []
    if facts.block_count == 0:
        comments.append("There is no code block. Put the code in one ```python block.")
    if facts.has_multiple_code_blocks:
        comments.append("There are multiple code blocks. Put all code in one code block.")
    if facts.block_count and not facts.is_runnable_language:
        found = facts.language or "untagged"
        comments.append(
            f"The code block is {found}. Tag it ```python (or ```bash for shell commands)."
        )
    if facts.syntax_error is not None:
        comments.append(f"The code does not parse ({facts.syntax_error}). Fix the syntax error.")
    top_level = claims.is_top_level_statement and facts.top_level is not False
    if facts.block_count and not top_level:
        comments.append(
            "The code does not run at the top level. Write a script whose statements run "
            "directly (call your functions at module level)."
        )
    prints = claims.is_print_result_to_console and facts.prints_result is not False
    if facts.block_count and not prints:
        comments.append("The code does not print its result. Print the result to the console.")
    return ReviewVerdict(approved=not comments, comments=comments, claims=claims, facts=facts)


class VerdictMiddleware:
    """Turns the reviewer's function call into a verdict message (text + ``data``).

    Sits outside the function-call middleware, so it sees the executed call; the
    code it reviews is the last message from ``coder_name``.
    """

    name = "review_verdict"

    def __init__(self, *, coder_name: str = "coder") -> None:
        self._coder_name = coder_name

    async def __call__(
        self, messages: Sequence[Message], options: GenerateReplyOptions, agent: Agent
    ) -> Message:
        reply = await agent.generate_reply(messages, options)
        call = _review_call(reply)
        if call is None:
            raise ModelBehaviorError(
                f"the reviewer answered without calling {review_code_block.name}: "
                f"{reply.content[:200]!r}"
            )
        from_coder = [message for message in messages if message.sender == self._coder_name]
        facts = inspect_code(from_coder[-1].content if from_coder else "")
        verdict = decide(claims_from_arguments(call.arguments), facts)
        return TextMessage(
            content=verdict.to_text(),
            sender=reply.sender or agent.name,
            usage=reply.usage,
            data=verdict,
        )


def _review_call(reply: Message) -> ToolCall | None:
    if not isinstance(reply, AggregateMessage):
        return None
    for call, result in zip(reply.tool_calls, reply.results, strict=False):
        if call.name == review_code_block.name and result.ok:
            return call
    return None
