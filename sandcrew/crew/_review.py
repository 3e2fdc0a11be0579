"""The reviewer's typed function and how its answer becomes a verdict.

The model reviews the coder's message by calling ``review_code_block``; what the code
itself proves (how many blocks, which language, whether it parses, runs at the top level and
prints) decides over what the model claimed, both ways: code that does not parse is never
approved, and working code the model calls "not top-level" is not rejected. Overruled claims
are recorded in the reviewer message's ``notes``; the model's own remarks reach the coder as
advice.

Where the endpoint cannot make the call (it supports no tools, or every attempt came back
without a call), the review needs no tools: the model answers ``APPROVE`` or ``REJECT: what
to fix`` in plain text, and the proven facts still decide what they prove.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from sandcrew.agents import (
    Agent,
    AggregateMessage,
    FunctionCallRequiredError,
    GenerateReplyOptions,
    Message,
    TextMessage,
    ToolCall,
    ToolsUnsupportedError,
    Usage,
    strip_reasoning,
)
from sandcrew.crew._code_facts import CodeFacts, inspect_code
from sandcrew.errors import ModelBehaviorError
from sandcrew.functions import function

APPROVAL_TEXT = "The code looks good, please ask runner to run the code for you."
TEXT_REVIEW_PROMPT = (
    "Review the code block in coder's last message. It must be one Python code block that "
    "runs at the top level and prints its result. Answer with one line: APPROVE, or "
    "REJECT: followed by what to fix."
)
_VERDICT_WORD = re.compile(r"\b(approved?|lgtm|reject(?:ed)?)\b", re.IGNORECASE)
COMMENTS_HEADLINE = "There're some comments from code reviewer, please fix these comments"
ADVICE_HEADLINE = "The reviewer also remarked (advice only; the code is approved as it is):"


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
    overruled: list[str] = []
    """The model's claims that the code proves wrong, each with what the code proves."""
    advice: list[str] = []
    """What the model said that the verdict does not require (passed on to the coder)."""

    def to_text(self) -> str:
        if self.approved:
            if not self.advice:
                return APPROVAL_TEXT
            return "\n".join([APPROVAL_TEXT, ADVICE_HEADLINE, *(f"- {a}" for a in self.advice)])
        return "\n".join([COMMENTS_HEADLINE, *(f"- {comment}" for comment in self.comments)])


def claims_from_arguments(arguments: str) -> ReviewClaims:
    """Parse the arguments of a valid ``review_code_block`` call."""
    return ReviewClaims.model_validate(json.loads(arguments or "{}"))


def decide(claims: ReviewClaims, facts: CodeFacts, *, remarks: Sequence[str] = ()) -> ReviewVerdict:
    """Merge the model's claims with the proven facts into one verdict.

    What the code proves decides, both ways: block count, language and syntax always come
    from the code; the top-level and printing checks take the model's word only where the
    code proves nothing. A claim the code proves wrong is overruled (``overruled``), and on
    an approval the model's ``remarks`` reach the coder as advice.
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
    top_level = _decided(claims.is_top_level_statement, facts.top_level)
    if facts.block_count and not top_level:
        comments.append(
            "The code does not run at the top level. Write a script whose statements run "
            "directly (call your functions at module level)."
        )
    prints = _decided(claims.is_print_result_to_console, facts.prints_result)
    if facts.block_count and not prints:
        comments.append("The code does not print its result. Print the result to the console.")
    overruled = _overruled(claims, facts) if facts.block_count else []
    approved = not comments
    return ReviewVerdict(
        approved=approved,
        comments=comments,
        claims=claims,
        facts=facts,
        overruled=overruled,
        advice=[remark for remark in remarks if remark] if approved else [],
    )


def _decided(claimed: bool, proven: bool | None) -> bool:
    return claimed if proven is None else proven


def _overruled(claims: ReviewClaims, facts: CodeFacts) -> list[str]:
    """The model's claims the code proves wrong, in words."""
    found: list[str] = []
    if claims.has_multiple_code_blocks != facts.has_multiple_code_blocks:
        found.append(
            f"has_multiple_code_blocks={claims.has_multiple_code_blocks}, but the message "
            f"has {facts.block_count} block(s){' forming one program' if facts.joined else ''}"
        )
    if claims.is_python_code_block != facts.is_runnable_language:
        found.append(
            f"is_python_code_block={claims.is_python_code_block}, but the block is "
            f"{facts.language or 'untagged'}"
        )
    if facts.top_level is not None and claims.is_top_level_statement != facts.top_level:
        proof = "runs statements" if facts.top_level else "runs no statement"
        found.append(
            f"is_top_level_statement={claims.is_top_level_statement}, but the code {proof} "
            "at module level"
        )
    if facts.prints_result is not None and claims.is_print_result_to_console != (
        facts.prints_result
    ):
        proof = "calls" if facts.prints_result else "never calls"
        found.append(
            f"is_print_result_to_console={claims.is_print_result_to_console}, but the code "
            f"{proof} print"
        )
    return found


def overruled_notes(verdict: ReviewVerdict) -> list[str]:
    """The transcript notes that say which of the model's claims the code overruled."""
    return [f"the code overruled the reviewer model: {claim}" for claim in verdict.overruled]


class VerdictMiddleware:
    """Turns the reviewer's function call into a verdict message (text + ``data``).

    Sits outside the function-call middleware, so it sees the executed call; the
    code it reviews is the last message from ``coder_name``. ``text_reviewer`` (the bare
    model agent, without tools) gives the plain-text review when the endpoint cannot make
    the call; without it such a failure ends the review with the error.
    """

    name = "review_verdict"

    def __init__(self, *, coder_name: str = "coder", text_reviewer: Agent | None = None) -> None:
        self._coder_name = coder_name
        self._text_reviewer = text_reviewer

    async def __call__(
        self, messages: Sequence[Message], options: GenerateReplyOptions, agent: Agent
    ) -> Message:
        from_coder = [message for message in messages if message.sender == self._coder_name]
        facts = inspect_code(from_coder[-1].content if from_coder else "")
        try:
            reply = await agent.generate_reply(messages, options)
        except ToolsUnsupportedError as error:
            if self._text_reviewer is None:
                raise
            return await self._text_review(messages, facts, agent.name, str(error), None, [])
        except FunctionCallRequiredError as error:
            if self._text_reviewer is None or not error.made_no_call:
                raise
            notes = [
                f"attempt {n}: {' | '.join(a.errors)}" for n, a in enumerate(error.attempts, 1)
            ]
            why = f"no function call in {len(error.attempts)} attempt(s)"
            return await self._text_review(messages, facts, agent.name, why, error.usage, notes)
        call = _review_call(reply)
        if call is None:
            raise ModelBehaviorError(
                f"the reviewer answered without calling {review_code_block.name}: "
                f"{reply.content[:200]!r}"
            )
        said = reply.text if isinstance(reply, AggregateMessage) else None
        remarks = [_trimmed(strip_reasoning(said or ""))]
        verdict = decide(claims_from_arguments(call.arguments), facts, remarks=remarks)
        return TextMessage(
            content=verdict.to_text(),
            sender=reply.sender or agent.name,
            usage=reply.usage,
            data=verdict,
            notes=[*reply.notes, *overruled_notes(verdict)],
        )

    async def _text_review(
        self,
        messages: Sequence[Message],
        facts: CodeFacts,
        sender: str,
        why: str,
        spent: Usage | None,
        notes: list[str],
    ) -> Message:
        assert self._text_reviewer is not None
        question = TextMessage(role="user", content=TEXT_REVIEW_PROMPT, sender="admin")
        reply = await self._text_reviewer.generate_reply([*messages, question])
        approves = _plain_verdict(reply.content)
        claims = ReviewClaims(
            has_multiple_code_blocks=facts.has_multiple_code_blocks,
            is_top_level_statement=_judged(facts.top_level, approves),
            is_python_code_block=facts.is_runnable_language,
            is_print_result_to_console=_judged(facts.prints_result, approves),
        )
        verdict = decide(claims, facts)
        if approves is False and not verdict.comments:
            reason = _reason(reply.content)
            if _all_proven(facts) and _PROVEN_TOPICS.search(reason):
                # It objects to what the code proves holds: the objection is advice.
                verdict = verdict.model_copy(
                    update={"overruled": [f"REJECT ({reason})"], "advice": [reason]}
                )
            else:
                verdict = verdict.model_copy(update={"approved": False, "comments": [reason]})
        said = "unclear, so the proven facts decided" if approves is None else reply.content
        return TextMessage(
            content=verdict.to_text(),
            sender=sender,
            usage=_sum(spent, reply.usage),
            data=verdict,
            notes=[
                *notes,
                *reply.notes,
                f"reviewed without tools ({why}); the model's verdict: {_trimmed(said)}",
                *overruled_notes(verdict),
            ],
        )


_PROVEN_TOPICS = re.compile(
    r"top[- ]?level|\bmain\b|module level|print|output|console|code blocks?|\btag|language"
    r"|python|syntax|parse",
    re.IGNORECASE,
)
"""Words of an objection about a check the code proves (not, say, about the algorithm)."""


def _all_proven(facts: CodeFacts) -> bool:
    """The code proves every check of the review (one runnable block that parses, runs at the
    top level and prints)."""
    return (
        facts.block_count >= 1
        and not facts.has_multiple_code_blocks
        and facts.is_runnable_language
        and facts.parses
        and facts.top_level is not None
        and facts.prints_result is not None
    )


def _plain_verdict(text: str) -> bool | None:
    """True for APPROVE, False for REJECT, None when the reply says neither (or both)."""
    words = [match.lower() for match in _VERDICT_WORD.findall(text)]
    approve = any(word.startswith("approv") or word == "lgtm" for word in words)
    reject = any(word.startswith("reject") for word in words)
    if approve == reject:
        return None
    return approve


def _sum(first: Usage | None, second: Usage | None) -> Usage | None:
    if first is None or second is None:
        return first or second
    return first + second


def _judged(proven: bool | None, approves: bool | None) -> bool:
    """A check the code proves keeps its proof; otherwise the model's verdict (or yes)."""
    if proven is not None:
        return proven
    return approves is not False


def _reason(text: str) -> str:
    _, _, after = text.partition(":")
    return _trimmed(after.strip() or text.strip())


def _trimmed(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:197] + "..."


def _review_call(reply: Message) -> ToolCall | None:
    if not isinstance(reply, AggregateMessage):
        return None
    for call, result in zip(reply.tool_calls, reply.results, strict=False):
        if call.name == review_code_block.name and result.ok:
            return call
    return None
