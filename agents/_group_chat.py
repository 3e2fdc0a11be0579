"""GroupChat: members take turns replying to a shared history until a stated stop reason.

Each round the orchestrator picks the next speaker (``None`` ends the chat), the speaker
replies to the working history, and the reply is appended. The working history is the
introductions plus the transcript **from** the last ``[GROUPCHAT_CLEAR_MESSAGES]`` message on
(as in AutoGen.NET, everything before the clear message is dropped for the speakers and the
orchestrator; the clear message itself stays, so the turn order still knows who spoke last and
a model is never sent an empty request). Reasoning blocks (``<think>…</think>``) are removed
from what speakers and orchestrators see; the full transcript is kept in the result.

``max_round`` counts **agent replies produced by this call** — not the history passed in,
not introductions, not the admin's speaker-selection calls.

Every rule that stops a chat lives in :mod:`._stop_policy`; this loop asks it before each
round, after each reply and when something goes wrong, and reports its :class:`StopReason`
with a readable detail. Errors that a speaker or the orchestrator raise on purpose (any
``SandcrewError``: a model that misbehaves, an unreachable endpoint, an ambiguous workflow)
end the chat and are kept on the result instead of crashing the caller.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ..core import SandcrewError, UserError
from ._agent import Agent
from ._graph import Graph
from ._messages import (
    Message,
    TextMessage,
    Usage,
    is_clear,
    with_sender,
)
from ._orchestrators import (
    OrchestrationContext,
    Orchestrator,
    RolePlayOrchestrator,
    RoundRobinOrchestrator,
    WorkflowOrchestrator,
)
from ._reasoning import without_reasoning
from ._stop_policy import ChatState, Stop, StopPolicy, StopReason, StopRule

_T = TypeVar("_T")


@dataclass(frozen=True)
class ChatResult:
    """How a chat went. ``messages`` is the history passed in plus every new message
    (introductions excluded); ``usage`` sums replies and speaker selection; ``notes`` says
    what the orchestrator decided on its own (e.g. a fallback speaker), round by round."""

    messages: list[Message]
    new_messages: list[Message]
    stop_reason: StopReason
    detail: str
    rounds: int
    usage: Usage
    duration: float
    error: BaseException | None = field(default=None, compare=False)
    notes: list[str] = field(default_factory=list, compare=False)

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
    """What speakers and orchestrators see: the introductions plus the transcript from the
    last clear message on (the clear message kept, as AutoGen.NET does), without reasoning."""
    kept = transcript[max(_last_clear_index(transcript), 0) :]
    return [without_reasoning(message) for message in [*introductions, *kept]]


class GroupChat:
    """A chat among ``members``. The orchestrator is chosen here, once: an ``admin`` →
    role play (narrowed by ``workflow`` when given); only a ``workflow`` → workflow; neither
    → round robin.

    Limits: ``token_budget`` (total tokens), ``time_budget`` (seconds of wall clock per
    call), ``no_progress_repeats`` (stop when one speaker has given the same reply — text,
    tool calls and structured data — to the same message this many times, in a row or not;
    the same words answering a *different* message are progress; ``None`` disables).
    ``admin_attempts`` bounds the admin's role-play tries. ``stop_rules`` are the
    application's own stop rules (see :mod:`._stop_policy`), asked after every reply.
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
        stop_rules: Sequence[StopRule] = (),
    ) -> None:
        self.members = list(members)
        self.admin = admin
        self.workflow = workflow
        self.token_budget = token_budget
        self.time_budget = time_budget
        self.no_progress_repeats = no_progress_repeats
        self.stop_rules = tuple(stop_rules)
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
        if max_round < 1:
            raise UserError(f"max_round must be >= 1 (got {max_round})")
        policy = StopPolicy(
            max_round=max_round,
            token_budget=self.token_budget,
            time_budget=self.time_budget,
            no_progress_repeats=self.no_progress_repeats,
            rules=self.stop_rules,
        )
        return ChatStream(_ChatRun(self, history, policy))

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
        return self._run.make_result(self._run.policy.caller_stopped(self._run.rounds))


class _TimeBudgetExceeded(Exception):
    pass


class _ChatRun:
    """The state of one call of a chat; ``step`` produces at most one new message."""

    def __init__(self, chat: GroupChat, history: Sequence[Message], policy: StopPolicy) -> None:
        self.chat = chat
        self.policy = policy
        self.transcript: list[Message] = list(history)
        self.history_length = len(self.transcript)
        self.rounds = 0
        self.usage = Usage()
        self.notes: list[str] = []
        self.started = time.monotonic()
        self.result: ChatResult | None = None

    def make_result(self, stop: Stop) -> ChatResult:
        return ChatResult(
            messages=list(self.transcript),
            new_messages=self.transcript[self.history_length :],
            stop_reason=stop.reason,
            detail=stop.detail,
            rounds=self.rounds,
            usage=self.usage,
            duration=self._elapsed(),
            error=stop.error,
            notes=list(self.notes),
        )

    def _finish(self, stop: Stop) -> None:
        self.result = self.make_result(stop)

    def _state(self) -> ChatState:
        return ChatState(
            transcript=self.transcript,
            rounds=self.rounds,
            tokens=self.usage.total_tokens,
            elapsed=self._elapsed(),
        )

    def _spend(self, context: OrchestrationContext, *usages: Usage | None) -> None:
        for usage in (context.usage, *usages):
            if usage is not None:
                self.usage = self.usage + usage
        self.notes.extend(f"round {self.rounds + 1}: {note}" for note in context.notes)
        context.notes.clear()
        context.usage = None

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    async def _within_budget(self, work: Awaitable[_T]) -> _T:
        budget = self.policy.time_budget
        if budget is None:
            return await work
        try:
            async with asyncio.timeout(budget - self._elapsed()) as scope:
                return await work
        except TimeoutError:
            if scope.expired():
                raise _TimeBudgetExceeded from None
            raise

    async def step(self) -> Message | None:
        if self.result is not None:
            return None
        limit = self.policy.before_round(self._state())
        if limit is not None:
            self._finish(limit)
            return None
        chat = self.chat
        seen = working_history(chat.introductions, self.transcript)
        context = OrchestrationContext(candidates=chat.members, history=seen)
        stage = "the orchestrator"
        try:
            speaker = await self._within_budget(chat.orchestrator.next_speaker(context))
            if speaker is None:
                self._spend(context)
                members = [agent.name for agent in chat.members]
                kind = type(chat.orchestrator).__name__
                self._finish(self.policy.no_speaker(seen, members, kind))
                return None
            stage = f"speaker {speaker.name!r}"
            reply: Message | None = await self._within_budget(speaker.generate_reply(seen))
        except _TimeBudgetExceeded:
            self._spend(context)
            self._finish(self.policy.out_of_time(self._state(), stage=stage))
            return None
        except SandcrewError as error:
            self._spend(context)
            # What the failed request tried (a change of chat form, a retry) is kept.
            tried = getattr(error, "notes", None) or []
            self.notes.extend(f"round {self.rounds + 1}: {note}" for note in tried)
            self._finish(self.policy.failed(error, stage=stage))
            return None
        if reply is None:
            self._spend(context)
            self._finish(self.policy.no_reply(speaker.name))
            return None
        self._spend(context, reply.usage)
        reply = with_sender(reply, speaker.name)
        self.transcript.append(reply)
        self.rounds += 1
        stop = self.policy.after_reply(self._state(), reply)
        if stop is not None:
            self._finish(stop)
        return reply
