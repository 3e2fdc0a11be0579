"""Why a chat stops: every rule that ends a group chat, and what counts as an answer.

This module is the one place to read to answer "why did this chat stop?". It is pure: the
chat loop (:mod:`._group_chat`) hands it the state of the chat and does what it says, and an
application (the crew) asks it whether a finished chat answered its task.

The stop reasons, in the order the chat loop checks them:

* before each round — :attr:`StopReason.TOKEN_BUDGET` (tokens spent reached the budget),
  :attr:`StopReason.TIME_BUDGET` (the wall clock ran out);
* choosing the speaker — :attr:`StopReason.NO_NEXT_SPEAKER` (the orchestrator chose nobody);
* the speaker's turn — :attr:`StopReason.NO_REPLY` (it returned nothing),
  :attr:`StopReason.TIME_BUDGET` (the budget ran out while it worked; the reply is
  cancelled), :attr:`StopReason.CONTEXT_OVERFLOW` (the model's context could not hold the
  request), :attr:`StopReason.ERROR` (any other sandcrew error, kept on the result);
* after the reply — :attr:`StopReason.TERMINATED` (a terminate message: the flag, or a whole
  content equal to ``[GROUPCHAT_TERMINATE]``), :attr:`StopReason.NO_PROGRESS` (the same reply
  to the same message too often), :attr:`StopReason.NO_COMPLETION_SIGNAL` (an application rule
  such as :class:`UnsignalledCompletion`), :attr:`StopReason.TOKEN_BUDGET`,
  :attr:`StopReason.MAX_ROUNDS`;
* outside the loop — :attr:`StopReason.CALLER_STOPPED` (the caller stopped reading).

Completion signals written by models: a model cannot set the ``terminate`` flag, so it is
asked to end its answer with a plain word (``[COMPLETE]``); :func:`read_completion` reads that
word the way real models write it and a middleware turns the reply into a terminate message
carrying a :class:`FinalAnswer`. :func:`is_solved` is the rule an application applies to the
finished chat.
"""

from __future__ import annotations

import enum
import itertools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from ..core import ErrorCode, InfrastructureError
from ._messages import TERMINATE, Message
from ._reasoning import strip_reasoning
from ._tokens import TokenBudgetExhaustedError


class StopReason(enum.Enum):
    TERMINATED = "terminated"
    """A speaker sent a terminate message."""
    MAX_ROUNDS = "max_rounds"
    """``max_round`` agent replies were produced."""
    NO_NEXT_SPEAKER = "no_next_speaker"
    """The orchestrator found nobody to speak next."""
    NO_REPLY = "no_reply"
    """The speaker returned nothing (``None``) instead of a message."""
    TOKEN_BUDGET = "token_budget"
    """The tokens spent (replies and speaker selection) reached the budget."""
    TIME_BUDGET = "time_budget"
    """The wall-clock budget ran out (an unfinished reply is cancelled)."""
    NO_PROGRESS = "no_progress"
    """A speaker gave the same reply to the same message several times."""
    NO_COMPLETION_SIGNAL = "no_completion_signal"
    """The agent that finishes the chat kept answering a verified result without the
    completion signal."""
    CONTEXT_OVERFLOW = "context_overflow"
    """A model endpoint answered that the request exceeds the model's context."""
    ERROR = "error"
    """A speaker or the orchestrator raised a sandcrew error (kept on the result)."""
    CALLER_STOPPED = "caller_stopped"
    """The caller stopped iterating :meth:`GroupChat.send` before the chat finished."""


@dataclass(frozen=True)
class Stop:
    """A decision to stop: the reason, a sentence saying why, and the error if one caused it."""

    reason: StopReason
    detail: str
    error: BaseException | None = None


@dataclass(frozen=True)
class ChatState:
    """What the rules look at: the transcript so far (history passed in included), agent
    replies produced by this call, tokens spent and seconds elapsed."""

    transcript: Sequence[Message]
    rounds: int
    tokens: int
    elapsed: float


class StopRule(Protocol):
    """An application's extra rule, asked after every reply: stop now (and why) or not."""

    def __call__(self, transcript: Sequence[Message]) -> Stop | None: ...


# --- the typed terminate signal ----------------------------------------------------------


def is_terminate(message: Message) -> bool:
    """True when the message is flagged ``terminate`` or its whole trimmed content is
    ``[GROUPCHAT_TERMINATE]``. A message that merely mentions the marker does not terminate."""
    return message.terminate or message.content.strip() == TERMINATE


# --- the rules of the chat loop ----------------------------------------------------------


@dataclass(frozen=True)
class StopPolicy:
    """The limits of one group chat and the decisions they lead to.

    ``max_round`` counts agent replies produced by one call; ``token_budget`` total tokens;
    ``time_budget`` wall-clock seconds of one call; ``no_progress_repeats`` how often one
    speaker may give the same reply to the same message (``None`` disables); ``rules`` are
    the application's own (see :class:`UnsignalledCompletion`).
    """

    max_round: int = 10
    token_budget: int | None = None
    time_budget: float | None = None
    no_progress_repeats: int | None = 3
    rules: tuple[StopRule, ...] = ()

    def before_round(self, state: ChatState) -> Stop | None:
        """Budgets already spent stop the chat before anyone is asked."""
        if self.token_budget is not None and state.tokens >= self.token_budget:
            return self._token_stop(state)
        if self.time_budget is not None and state.elapsed >= self.time_budget:
            return self.out_of_time(state)
        return None

    def after_reply(self, state: ChatState, reply: Message) -> Stop | None:
        """The reply just appended to ``state.transcript`` may end the chat."""
        if is_terminate(reply):
            return Stop(StopReason.TERMINATED, f"{reply.sender} sent the terminate message")
        if self._repeats(state.transcript, reply):
            return Stop(
                StopReason.NO_PROGRESS,
                f"{reply.sender} sent the same reply {self.no_progress_repeats} times to the "
                f"same message: {reply.content.strip()[:80]!r}",
            )
        for rule in self.rules:
            stop = rule(state.transcript)
            if stop is not None:
                return stop
        if self.token_budget is not None and state.tokens >= self.token_budget:
            return self._token_stop(state)
        if state.rounds >= self.max_round:
            return Stop(
                StopReason.MAX_ROUNDS,
                f"reached the limit of {self.max_round} rounds (agent replies in this call)",
            )
        return None

    def no_speaker(
        self, history: Sequence[Message], members: Sequence[str], orchestrator: str
    ) -> Stop:
        """The orchestrator chose nobody: say who spoke last and why nobody follows."""
        if not history:
            detail = "the history is empty and the orchestrator chose nobody to start"
        elif history[-1].sender not in members:
            detail = f"the last message is from {history[-1].sender!r}, who is not a member"
            detail += " of the chat"
        else:
            detail = f"{orchestrator} found no next speaker after {history[-1].sender!r}"
        return Stop(StopReason.NO_NEXT_SPEAKER, detail)

    def no_reply(self, speaker: str) -> Stop:
        """A speaker returned nothing: the chat cannot go on without its turn."""
        return Stop(
            StopReason.NO_REPLY,
            f"speaker {speaker!r} returned nothing instead of a message",
        )

    def out_of_time(self, state: ChatState, *, stage: str | None = None) -> Stop:
        detail = f"ran {state.elapsed:.2f} s; the time budget is {self.time_budget} s"
        if stage is not None:
            detail += f" (while {stage} worked)"
        return Stop(StopReason.TIME_BUDGET, detail)

    def failed(self, error: BaseException, *, stage: str) -> Stop:
        """A sandcrew error from ``stage`` (the orchestrator or a speaker) ends the chat."""
        if is_context_overflow(error):
            return Stop(
                StopReason.CONTEXT_OVERFLOW,
                f"the request of {stage} does not fit the model's context: {error}",
                error,
            )
        if isinstance(error, TokenBudgetExhaustedError):
            # A request refused before it was sent: the budget ended the chat, not a failure.
            return Stop(StopReason.TOKEN_BUDGET, f"{stage}: {error}")
        return Stop(StopReason.ERROR, f"{stage} failed: {error}", error)

    def caller_stopped(self, rounds: int) -> Stop:
        return Stop(
            StopReason.CALLER_STOPPED,
            f"the caller stopped reading after {rounds} reply(ies)",
        )

    def _token_stop(self, state: ChatState) -> Stop:
        return Stop(
            StopReason.TOKEN_BUDGET,
            f"used {state.tokens} tokens; the budget is {self.token_budget}",
        )

    def _repeats(self, transcript: Sequence[Message], reply: Message) -> bool:
        """True when ``reply`` (the last message) completes ``no_progress_repeats`` identical
        (message answered, reply) exchanges by its sender."""
        needed = self.no_progress_repeats
        if needed is None:
            return False
        wanted = _exchange(transcript, len(transcript) - 1)
        same = sum(
            1
            for index, message in enumerate(transcript)
            if message.sender == reply.sender and _exchange(transcript, index) == wanted
        )
        return same >= needed


def is_context_overflow(error: BaseException) -> bool:
    """True for an endpoint's answer that the request exceeds the model's context."""
    return isinstance(error, InfrastructureError) and error.code is ErrorCode.MODEL_CONTEXT_EXCEEDED


_Fingerprint = tuple[str, str, tuple[tuple[str, str], ...], str]


def _data_fingerprint(data: dict[str, Any] | BaseModel | None) -> str:
    if data is None:
        return ""
    if isinstance(data, BaseModel):
        return data.model_dump_json()
    return json.dumps(data, sort_keys=True, default=str)


def _fingerprint(message: Message) -> _Fingerprint:
    """What makes two replies the same: kind, text, tool calls and structured data."""
    calls = tuple((c.name, c.arguments) for c in getattr(message, "tool_calls", []))
    return (message.type, message.content.strip(), calls, _data_fingerprint(message.data))


def _exchange(
    transcript: Sequence[Message], index: int
) -> tuple[_Fingerprint | None, _Fingerprint]:
    """The reply at ``index`` together with the message it answered (the one before it)."""
    context = _fingerprint(transcript[index - 1]) if index > 0 else None
    return (context, _fingerprint(transcript[index]))


# --- completion signals written by models ------------------------------------------------

COMPLETE_SIGNAL = "[COMPLETE]"
"""The plain word a model says when the task is answered; a middleware turns it into a
terminate message (the robust pattern of AutoGen's two-agent chat)."""

CLOSING_REMARK_MAX_CHARS = 80
"""A line this short after the signal is a closing remark ("Let me know if …"), not prose
that continues the message."""

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_DECORATION = "*_`~ \t"
_END_PUNCTUATION = ".!。"
# What may stand right before a signal written at the end of a sentence: the end of that
# sentence, a number or closing markup — not a word ("I will not say [COMPLETE].").
_ENDS_A_STATEMENT = re.compile(r"""(^|[.!?)\]}"'*`_]|\d)$""")


class FinalAnswer(BaseModel):
    """The answer a finishing agent gave, attached to its terminate message."""

    model_config = ConfigDict(frozen=True)

    kind: str = "final_answer"
    answer: str


def read_completion(
    text: str, signal: str = COMPLETE_SIGNAL, *, earlier: Sequence[str] = ()
) -> str | None:
    """The answer when the visible text of a reply ends its prose with ``signal``, else None.

    Accepted, ignoring case, markdown emphasis, backticks and end punctuation: the signal on
    the last prose line (alone, or after a finished sentence on the same line), the word
    without its brackets on a line of its own, and one short closing remark after it. Code
    blocks may come before it; after it, only a repeat of code the chat already holds
    (``earlier``: the texts of earlier messages), with one short line leading in ("For
    reference, the code was:"). Refused: the signal mid-text, inside a code block, or with
    prose or new code after it. The answer is the text before the signal (code indentation
    intact), reasoning removed.
    """
    lines = strip_reasoning(text).splitlines()
    in_code = _code_line_mask(lines)
    end = _start_of_repeat(lines, in_code, earlier, signal)
    lines, in_code = lines[:end], in_code[:end]
    prose = [index for index, line in enumerate(lines) if line.strip() and not in_code[index]]
    if not prose:
        return None
    candidates = [prose[-1]]
    if len(prose) >= 2 and len(lines[prose[-1]].strip()) <= CLOSING_REMARK_MAX_CHARS:
        candidates.append(prose[-2])
    for index in candidates:
        if any(in_code[index + 1 :]):
            return None
        before = _before_signal(lines[index], signal)
        if before is not None:
            return "\n".join([*lines[:index], before]).strip("\n").rstrip()
    return None


def _start_of_repeat(
    lines: Sequence[str], in_code: Sequence[bool], earlier: Sequence[str], signal: str
) -> int:
    """Where a closing repeat of earlier code starts (its lead-in line included), or
    ``len(lines)`` when the text does not end with one."""
    known = [_normalized(text) for text in earlier]
    index = len(lines)
    repeated = False
    while True:
        while index > 0 and not lines[index - 1].strip():
            index -= 1
        if index == 0 or not in_code[index - 1]:
            break
        start = index - 1
        while start > 0 and in_code[start - 1] and not _opens_block(lines, in_code, start):
            start -= 1
        code = _normalized("\n".join(lines[start + 1 : index - 1]))
        if not code or not any(code in text for text in known):
            return len(lines)
        repeated, index = True, start
    if not repeated:
        return len(lines)
    lead_in = index - 1
    short = lead_in >= 0 and len(lines[lead_in].strip()) <= CLOSING_REMARK_MAX_CHARS
    if short and _before_signal(lines[lead_in], signal) is None:
        return lead_in
    return index


def _opens_block(lines: Sequence[str], in_code: Sequence[bool], index: int) -> bool:
    """True when the fence at ``index`` opens its block (the line before it is not code)."""
    return _FENCE.match(lines[index]) is not None and (index == 0 or not in_code[index - 1])


def _normalized(code: str) -> str:
    return "\n".join(line.rstrip() for line in code.strip().splitlines())


def _before_signal(line: str, signal: str) -> str | None:
    """The text before ``signal`` when the line ends with it (None when it does not)."""
    bare = signal.strip("[]").lower()
    normalized = line.rstrip().rstrip(_END_PUNCTUATION).rstrip(_DECORATION)
    normalized = normalized.rstrip(_END_PUNCTUATION).rstrip(_DECORATION)
    if normalized.lower().endswith(signal.lower()):
        before = normalized[: -len(signal)].rstrip(_DECORATION + ":")
        if _ENDS_A_STATEMENT.search(before.strip()):
            return before.rstrip()
        return None
    whole = normalized.lstrip(_DECORATION + "#>-").lower()
    if whole == bare:
        return ""
    return None


def _code_line_mask(lines: Sequence[str]) -> list[bool]:
    """For each line: is it a fence or inside a fenced block (an unclosed fence runs to the
    end)?"""
    mask: list[bool] = []
    opening: str | None = None
    for line in lines:
        match = _FENCE.match(line)
        if opening is None:
            if match is not None:
                opening = match.group(1)
            mask.append(opening is not None)
            continue
        mask.append(True)
        fence = match.group(1) if match is not None else ""
        if fence and fence[0] == opening[0] and len(fence) >= len(opening):
            opening = None
    return mask


# --- an application rule: the finisher answers a verified result without the signal ---


@dataclass(frozen=True)
class UnsignalledCompletion:
    """Stop when ``finisher`` has answered a verified result ``patience`` times without the
    completion signal (a model that will not say the word would otherwise send the chat
    round in circles). ``verified`` tells a verified result (e.g. a successful run)."""

    finisher: str
    verified: Callable[[Message], bool]
    patience: int = 2
    signal: str = COMPLETE_SIGNAL

    def __call__(self, transcript: Sequence[Message]) -> Stop | None:
        unsignalled = sum(
            1
            for before, reply in itertools.pairwise(transcript)
            if reply.sender == self.finisher and self.verified(before) and not is_terminate(reply)
        )
        if unsignalled < self.patience:
            return None
        return Stop(
            StopReason.NO_COMPLETION_SIGNAL,
            f"{self.finisher} answered a successful result {unsignalled} times without a "
            f"recognisable completion signal ({self.signal} at the end of its message)",
        )


# --- what a finished chat achieved ---------------------------------------------------------


def final_answer(reason: StopReason, last: Message | None) -> str | None:
    """The answer a terminated chat ended with (None when it did not end with one)."""
    if reason is not StopReason.TERMINATED or last is None:
        return None
    data = last.data
    answer = data.answer if isinstance(data, FinalAnswer) else strip_reasoning(last.content)
    return answer or None


def is_solved(reason: StopReason, verified_results: int) -> bool:
    """A task is solved when the chat was terminated (the finisher gave its answer) after at
    least one verified result (e.g. a successful run)."""
    return reason is StopReason.TERMINATED and verified_results > 0
