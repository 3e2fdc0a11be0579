"""GroupChat: members take turns replying to a shared history until a stated stop reason.

Each round the orchestrator picks the next speaker (``None`` ends the chat), the speaker
replies to the working history, and the reply is appended. The working history is the
introductions plus the transcript **after** the last ``[GROUPCHAT_CLEAR_MESSAGES]`` message
(as in AutoGen.NET, the clear message itself and everything before it are dropped for the
speakers). Orchestrators see the transcript from the clear message on, so that they still know
who spoke last. The full transcript is kept in the result.

``max_round`` counts **agent replies produced by this call** — not the history passed in,
not introductions, not the admin's speaker-selection calls.

Every finished chat reports a :class:`StopReason` and a readable detail. Errors that a
speaker or the orchestrator raise on purpose (any ``SandcrewError``: a model that misbehaves,
an unreachable endpoint, an ambiguous workflow) end the chat with ``StopReason.ERROR`` and
are kept on the result instead of crashing the caller.
"""

from __future__ import annotations

import asyncio
import enum
import json
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from ..core import SandcrewError, UserError
from ._agent import Agent
from ._graph import Graph
from ._messages import (
    Message,
    TextMessage,
    Usage,
    is_clear,
    is_terminate,
    with_sender,
)
from ._orchestrators import (
    OrchestrationContext,
    Orchestrator,
    RolePlayOrchestrator,
    RoundRobinOrchestrator,
    WorkflowOrchestrator,
)

_T = TypeVar("_T")


class StopReason(enum.Enum):
    TERMINATED = "terminated"
    """A speaker sent a terminate message."""
    MAX_ROUNDS = "max_rounds"
    """``max_round`` agent replies were produced."""
    NO_NEXT_SPEAKER = "no_next_speaker"
    """The orchestrator found nobody to speak next."""
    TOKEN_BUDGET = "token_budget"
    """The tokens spent (replies and speaker selection) reached the budget."""
    TIME_BUDGET = "time_budget"
    """The wall-clock budget ran out (an unfinished reply is cancelled)."""
    NO_PROGRESS = "no_progress"
    """A speaker gave the same reply to the same message several times."""
    ERROR = "error"
    """A speaker or the orchestrator raised a sandcrew error (kept on the result)."""
    CALLER_STOPPED = "caller_stopped"
    """The caller stopped iterating :meth:`GroupChat.send` before the chat finished."""


@dataclass(frozen=True)
class ChatResult:
    """How a chat went. ``messages`` is the history passed in plus every new message
    (introductions excluded); ``usage`` sums replies and speaker selection."""

    messages: list[Message]
    new_messages: list[Message]
    stop_reason: StopReason
    detail: str
    rounds: int
    usage: Usage
    duration: float
    error: BaseException | None = field(default=None, compare=False)

    @property
    def last_message(self) -> Message | None:
        return self.messages[-1] if self.messages else None


def _last_clear_index(transcript: Sequence[Message]) -> int:
    """Index of the last clear message in ``transcript`` (-1 when there is none)."""
    last = -1
    for index, message in enumerate(transcript):
        if is_clear(message):
            last = index
    return last


def working_history(
    introductions: Sequence[Message], transcript: Sequence[Message]
) -> list[Message]:
    """What speakers see: the introductions plus the transcript after the last clear message
    (the clear message itself is dropped too)."""
    return [*introductions, *transcript[_last_clear_index(transcript) + 1 :]]


def orchestration_history(
    introductions: Sequence[Message], transcript: Sequence[Message]
) -> list[Message]:
    """What orchestrators see: like :func:`working_history` but keeping the last clear
    message, whose sender is the last speaker (turn order and workflow transitions need it)."""
    return [*introductions, *transcript[max(_last_clear_index(transcript), 0) :]]


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


class GroupChat:
    """A chat among ``members``. The orchestrator is chosen here, once: an ``admin`` →
    role play (narrowed by ``workflow`` when given); only a ``workflow`` → workflow; neither
    → round robin.

    Limits: ``token_budget`` (total tokens), ``time_budget`` (seconds of wall clock per
    call), ``no_progress_repeats`` (stop when one speaker has given the same reply — text,
    tool calls and structured data — to the same message this many times, in a row or not;
    the same words answering a *different* message are progress; ``None`` disables).
    ``admin_attempts`` bounds the admin's role-play tries.
    """

    def __init__(
        self,
        members: Sequence[Agent],
        admin: Agent | None = None,
        workflow: Graph | None = None,
        *,
        token_budget: int | None = None,
        time_budget: float | None = None,
        no_progress_repeats: int | None = 3,
        admin_attempts: int = 3,
    ) -> None:
        self.members = list(members)
        self.admin = admin
        self.workflow = workflow
        self.token_budget = token_budget
        self.time_budget = time_budget
        self.no_progress_repeats = no_progress_repeats
        self.introductions: list[Message] = []
        self._validate(admin_attempts)
        self.orchestrator: Orchestrator
        if admin is not None:
            self.orchestrator = RolePlayOrchestrator(admin, workflow, max_attempts=admin_attempts)
        elif workflow is not None:
            self.orchestrator = WorkflowOrchestrator(workflow)
        else:
            self.orchestrator = RoundRobinOrchestrator()

    def _validate(self, admin_attempts: int) -> None:
        problems: list[str] = []
        if not self.members:
            problems.append("a group chat needs at least one member")
        names = [getattr(agent, "name", None) for agent in self.members]
        unnamed = [
            index for index, name in enumerate(names) if not isinstance(name, str) or not name
        ]
        if unnamed:
            problems.append(f"every member needs a name (members at positions {unnamed} have none)")
        duplicates = sorted({n for n in names if isinstance(n, str) and n and names.count(n) > 1})
        if duplicates:
            problems.append(f"member names must be unique (repeated: {', '.join(duplicates)})")
        if self.admin is not None and not getattr(self.admin, "name", None):
            problems.append("the admin needs a name")
        if self.workflow is not None:
            outsiders = [n for n in self.workflow.agent_names if n not in names]
            if outsiders:
                problems.append(
                    f"every agent in the workflow must be a member (not members: "
                    f"{', '.join(outsiders)})"
                )
        if self.token_budget is not None and self.token_budget < 1:
            problems.append(f"token_budget must be >= 1 (got {self.token_budget})")
        if self.time_budget is not None and self.time_budget <= 0:
            problems.append(f"time_budget must be > 0 seconds (got {self.time_budget})")
        if self.no_progress_repeats is not None and self.no_progress_repeats < 2:
            problems.append(
                f"no_progress_repeats must be >= 2 or None (got {self.no_progress_repeats})"
            )
        if admin_attempts < 1:
            problems.append(f"admin_attempts must be >= 1 (got {admin_attempts})")
        if problems:
            raise UserError("invalid group chat:\n- " + "\n- ".join(problems))

    def send_introduction(self, text: str, *, sender: Agent | str) -> None:
        """Add an introduction to the context every speaker (and the admin) sees first."""
        name = sender if isinstance(sender, str) else sender.name
        self.introductions.append(TextMessage(role="user", content=text, sender=name))

    def send(self, history: Sequence[Message] = (), max_round: int = 10) -> ChatStream:
        """Run the chat, yielding each new message as it is produced.

        ``max_round`` counts agent replies produced by this call. Stop iterating whenever you
        like; ``stream.result`` then reports ``StopReason.CALLER_STOPPED``.
        """
        return ChatStream(_ChatRun(self, history, max_round))

    async def call(self, history: Sequence[Message] = (), max_round: int = 10) -> ChatResult:
        """Run the chat to its end and return the result.

        ``max_round`` counts agent replies produced by this call.
        """
        stream = self.send(history, max_round)
        async for _ in stream:
            pass
        return stream.result


class ChatStream:
    """Async iterator over a running chat's new messages; ``result`` when done (or stopped)."""

    def __init__(self, run: _ChatRun) -> None:
        self._run = run

    def __aiter__(self) -> ChatStream:
        return self

    async def __anext__(self) -> Message:
        message = await self._run.step()
        if message is None:
            raise StopAsyncIteration
        return message

    @property
    def finished(self) -> bool:
        return self._run.result is not None

    @property
    def result(self) -> ChatResult:
        """The final result; if iteration stopped early, a result with ``CALLER_STOPPED``."""
        if self._run.result is not None:
            return self._run.result
        return self._run.make_result(
            StopReason.CALLER_STOPPED,
            f"the caller stopped reading after {self._run.rounds} reply(ies)",
        )


class _TimeBudgetExceeded(Exception):
    pass


class _ChatRun:
    """The state of one call of a chat; ``step`` produces at most one new message."""

    def __init__(self, chat: GroupChat, history: Sequence[Message], max_round: int) -> None:
        if max_round < 1:
            raise UserError(f"max_round must be >= 1 (got {max_round})")
        self.chat = chat
        self.max_round = max_round
        self.transcript: list[Message] = list(history)
        self.history_length = len(self.transcript)
        self.rounds = 0
        self.usage = Usage()
        self.started = time.monotonic()
        self.result: ChatResult | None = None

    def make_result(
        self, reason: StopReason, detail: str, error: BaseException | None = None
    ) -> ChatResult:
        return ChatResult(
            messages=list(self.transcript),
            new_messages=self.transcript[self.history_length :],
            stop_reason=reason,
            detail=detail,
            rounds=self.rounds,
            usage=self.usage,
            duration=time.monotonic() - self.started,
            error=error,
        )

    def _finish(self, reason: StopReason, detail: str, error: BaseException | None = None) -> None:
        self.result = self.make_result(reason, detail, error)

    def _spend(self, *usages: Usage | None) -> None:
        for usage in usages:
            if usage is not None:
                self.usage = self.usage + usage

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    async def _within_budget(self, work: Awaitable[_T]) -> _T:
        budget = self.chat.time_budget
        if budget is None:
            return await work
        try:
            async with asyncio.timeout(budget - self._elapsed()) as scope:
                return await work
        except TimeoutError:
            if scope.expired():
                raise _TimeBudgetExceeded from None
            raise

    def _limit_before_round(self) -> tuple[StopReason, str] | None:
        budget = self.chat.token_budget
        if budget is not None and self.usage.total_tokens >= budget:
            return StopReason.TOKEN_BUDGET, self._token_detail()
        if self.chat.time_budget is not None and self._elapsed() >= self.chat.time_budget:
            return StopReason.TIME_BUDGET, self._time_detail()
        return None

    def _token_detail(self) -> str:
        return f"used {self.usage.total_tokens} tokens; the budget is {self.chat.token_budget}"

    def _time_detail(self) -> str:
        return f"ran {self._elapsed():.2f} s; the time budget is {self.chat.time_budget} s"

    async def step(self) -> Message | None:
        if self.result is not None:
            return None
        limit = self._limit_before_round()
        if limit is not None:
            self._finish(*limit)
            return None
        chat = self.chat
        seen_by_orchestrator = orchestration_history(chat.introductions, self.transcript)
        context = OrchestrationContext(candidates=chat.members, history=seen_by_orchestrator)
        stage = "the orchestrator"
        try:
            speaker = await self._within_budget(chat.orchestrator.next_speaker(context))
            if speaker is None:
                self._spend(context.usage)
                detail = self._no_speaker_detail(seen_by_orchestrator)
                self._finish(StopReason.NO_NEXT_SPEAKER, detail)
                return None
            stage = f"speaker {speaker.name!r}"
            history = working_history(chat.introductions, self.transcript)
            reply = await self._within_budget(speaker.generate_reply(history))
        except _TimeBudgetExceeded:
            self._spend(context.usage)
            self._finish(StopReason.TIME_BUDGET, self._time_detail() + f" (while {stage} worked)")
            return None
        except SandcrewError as error:
            self._spend(context.usage)
            detail = f"{type(error).__name__} from {stage}: {error}"
            self._finish(StopReason.ERROR, detail, error)
            return None
        self._spend(context.usage, reply.usage)
        reply = with_sender(reply, speaker.name)
        self.transcript.append(reply)
        self.rounds += 1
        self._after_reply(reply)
        return reply

    def _after_reply(self, reply: Message) -> None:
        chat = self.chat
        if is_terminate(reply):
            self._finish(StopReason.TERMINATED, f"{reply.sender} sent the terminate message")
        elif self._repeats(reply):
            self._finish(
                StopReason.NO_PROGRESS,
                f"{reply.sender} sent the same reply {chat.no_progress_repeats} times to the "
                f"same message: {reply.content.strip()[:80]!r}",
            )
        elif chat.token_budget is not None and self.usage.total_tokens >= chat.token_budget:
            self._finish(StopReason.TOKEN_BUDGET, self._token_detail())
        elif self.rounds >= self.max_round:
            self._finish(
                StopReason.MAX_ROUNDS,
                f"reached max_round={self.max_round} (agent replies in this call)",
            )

    def _repeats(self, reply: Message) -> bool:
        """True when ``reply`` (the last message) completes ``no_progress_repeats`` identical
        (message answered, reply) exchanges by its sender."""
        needed = self.chat.no_progress_repeats
        if needed is None:
            return False
        last = len(self.transcript) - 1
        wanted = _exchange(self.transcript, last)
        same = sum(
            1
            for index, message in enumerate(self.transcript)
            if message.sender == reply.sender and _exchange(self.transcript, index) == wanted
        )
        return same >= needed

    def _no_speaker_detail(self, history: Sequence[Message]) -> str:
        if not history:
            return "the history is empty and the orchestrator chose nobody to start"
        last = history[-1].sender
        if all(agent.name != last for agent in self.chat.members):
            return f"the last message is from {last!r}, who is not a member of the chat"
        kind = type(self.chat.orchestrator).__name__
        return f"{kind} found no next speaker after {last!r}"
