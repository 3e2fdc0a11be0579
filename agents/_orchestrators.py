"""Next-speaker selection: round robin, workflow graph, and admin role play."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..core import ModelBehaviorError, UserError
from ._agent import Agent, GenerateReplyOptions, agent_description
from ._graph import Graph
from ._messages import Message, TextMessage, Usage, add_usage
from ._reasoning import is_unfinished_reasoning, strip_reasoning


@dataclass
class OrchestrationContext:
    """What an orchestrator sees: the members and the working history of the chat."""

    candidates: Sequence[Agent]
    history: Sequence[Message]
    usage: Usage | None = field(default=None)
    """Tokens spent on selecting speakers (orchestrators add to it)."""
    notes: list[str] = field(default_factory=list)
    """What the orchestrator decided on its own (a fallback speaker and why); the chat keeps
    them on its result."""

    def record_usage(self, usage: Usage | None) -> None:
        self.usage = add_usage(self.usage, usage)

    def member(self, name: str | None) -> Agent | None:
        return next((agent for agent in self.candidates if agent.name == name), None)


class Orchestrator(Protocol):
    """Picks the next speaker, or ``None`` to end the chat."""

    async def next_speaker(self, context: OrchestrationContext) -> Agent | None: ...


class AmbiguousWorkflowError(UserError):
    """A workflow without an admin offered several next speakers."""


def round_robin_next(candidates: Sequence[Agent], history: Sequence[Message]) -> Agent | None:
    """Round robin's choice: empty history → the first candidate; otherwise the candidate
    after the last sender, wrapping around; a last sender who is not a candidate → None."""
    if not candidates:
        return None
    if not history:
        return candidates[0]
    names = [agent.name for agent in candidates]
    last_sender = history[-1].sender
    if last_sender not in names:
        return None
    return candidates[(names.index(last_sender) + 1) % len(candidates)]


class RoundRobinOrchestrator:
    """Members speak in list order: empty history → the first member; otherwise the member
    after the last sender, wrapping around; a last sender who is not a member → ``None``."""

    async def next_speaker(self, context: OrchestrationContext) -> Agent | None:
        return round_robin_next(list(context.candidates), context.history)


async def _workflow_candidates(
    workflow: Graph, context: OrchestrationContext, current: Agent
) -> list[Agent]:
    """The members the workflow allows after ``current`` (graph agents mapped by name)."""
    following = await workflow.next_agents(current, context.history)
    members = [context.member(agent.name) for agent in following]
    return [member for member in members if member is not None]


class WorkflowOrchestrator:
    """The workflow decides: the last sender's outgoing transitions whose conditions hold.

    None → ``None`` (the chat ends); one → it; several → :class:`AmbiguousWorkflowError`
    (a pure workflow must be deterministic; add an admin to arbitrate).
    """

    def __init__(self, workflow: Graph) -> None:
        self.workflow = workflow

    async def next_speaker(self, context: OrchestrationContext) -> Agent | None:
        if not context.history:
            return None
        current = context.member(context.history[-1].sender)
        if current is None:
            return None
        candidates = await _workflow_candidates(self.workflow, context, current)
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0]
        names = ", ".join(agent.name for agent in candidates)
        raise AmbiguousWorkflowError(
            f"the workflow allows several next speakers after {current.name!r} ({names}); "
            "make the transition conditions exclusive or give the chat an admin to choose"
        )


ROLE_PLAY_OPTIONS = GenerateReplyOptions(temperature=0, max_tokens=128, stop_sequences=[":"])
"""The admin's request settings for role play (deterministic, short, stops at ':')."""

REASONING_ROLE_PLAY_OPTIONS = GenerateReplyOptions(temperature=0, max_tokens=2048)
"""Role play for a reasoning model, once one stopped inside its ``<think>`` block: room for
the reasoning, and no ``':'`` stop sequence (reasoning is full of colons)."""


_ANSWER_WITH = "Answer with 'From name:' where name is exactly one of: {names}"


def role_play_prompt(candidates: Sequence[Agent]) -> str:
    """The role-play instruction for the admin (AutoGen.NET's text; descriptions added when
    agents have them, so the admin knows what each role does)."""
    names = [agent.name for agent in candidates]
    lines = [
        "You are in a role play game. Carefully read the conversation history and carry on "
        "the conversation.",
        "The available roles are:",
        ",".join(names),
    ]
    described = [(agent.name, agent_description(agent)) for agent in candidates]
    if any(description for _, description in described):
        lines += ["", "What each role does:"]
        lines += [f"{name}: {description}" for name, description in described if description]
    lines += [
        "",
        "Each message will start with 'From name:', e.g:",
        f"From {names[0]}:",
        "//your message//.",
    ]
    return "\n".join(lines)


def role_play_history(history: Sequence[Message]) -> list[TextMessage]:
    """Each message rewritten for the admin as one user message:
    ``From {name}:\\n{content}\\n<eof_msg>\\nround # {i}``."""
    return [
        TextMessage(
            role="user",
            content=f"From {message.sender or ''}:\n{message.content}\n<eof_msg>\nround # {index}",
        )
        for index, message in enumerate(history)
    ]


_EMPHASIS = re.compile(r"[*_`~#>\"'\[\]()]")


def _named(text: str, candidates: Sequence[Agent], *, after_from: bool) -> list[Agent]:
    """The candidates ``text`` names as whole words (only right after "From" when asked)."""
    found: list[Agent] = []
    for agent in candidates:
        name = re.escape(agent.name)
        prefix = r"\bfrom\s+" if after_from else r"(?<![\w-])"
        if re.search(prefix + name + r"(?![\w-])", text, re.IGNORECASE):
            found.append(agent)
    return found


def parse_role_play_reply(reply: str, candidates: Sequence[Agent]) -> Agent | None:
    """The one candidate a speaker-selection reply names, or None (none or several).

    Read the way real models answer: ``From coder:``, ``From coder.``, ``**From coder**``,
    ``coder``, ``The next speaker should be: From runner``; reasoning and markdown are
    ignored. Names after "From" count first; otherwise any candidate named as a whole word.
    """
    text = _EMPHASIS.sub(" ", strip_reasoning(reply))
    for after_from in (True, False):
        named = _named(text, candidates, after_from=after_from)
        if len(named) == 1:
            return named[0]
        if named:
            return None
    return None


class RolePlayOrchestrator:
    """An admin agent picks the next speaker by role play.

    With a workflow, candidates are first narrowed to what the workflow allows after the last
    sender (when that sender is a member); no candidate → ``None``; exactly one → it, without
    asking the admin. Otherwise the admin gets the role-play prompt as the system message
    (which takes the place of the admin's own system message), then the rewritten history,
    with temperature 0, max tokens 128 and stop ``":"``. A reply naming no candidate, or
    several, or no usable reply at all (a :class:`ModelBehaviorError`), is asked again with
    a message saying what was wrong (so no retry repeats a request), up to ``max_attempts``
    attempts in all; then the chat goes on with the
    round-robin choice among the candidates, and the context's notes say so. A reply that
    stopped inside a ``<think>`` block marks the admin as a reasoning model: its requests
    from then on leave room for the reasoning.
    """

    def __init__(self, admin: Agent, workflow: Graph | None = None, *, max_attempts: int = 3):
        if max_attempts < 1:
            raise UserError(f"max_attempts must be >= 1 (got {max_attempts})")
        self.admin = admin
        self.workflow = workflow
        self.max_attempts = max_attempts
        self.options = ROLE_PLAY_OPTIONS

    async def next_speaker(self, context: OrchestrationContext) -> Agent | None:
        candidates = list(context.candidates)
        if len(candidates) <= 1:
            return candidates[0] if candidates else None
        if self.workflow is not None and context.history:
            current = context.member(context.history[-1].sender)
            if current is not None:
                candidates = await _workflow_candidates(self.workflow, context, current)
                if len(candidates) <= 1:
                    return candidates[0] if candidates else None
        return await self._ask_admin(candidates, context)

    async def _ask_admin(self, candidates: Sequence[Agent], context: OrchestrationContext) -> Agent:
        messages: list[Message] = [
            TextMessage(role="system", content=role_play_prompt(candidates)),
            *role_play_history(context.history),
        ]
        replies: list[str] = []
        names = ",".join(agent.name for agent in candidates)
        for _ in range(self.max_attempts):
            try:
                reply = await self.admin.generate_reply(messages, self.options)
            except ModelBehaviorError as error:
                # An unusable answer (empty, refused, cut off) is one more reply naming
                # nobody; the next request says so (asking the same again gets the same).
                replies.append(f"<no usable reply: {error}>")
                messages.append(
                    TextMessage(
                        role="user",
                        content=(
                            "Your answer could not be used (it was empty or cut off). "
                            f"{_ANSWER_WITH.format(names=names)}"
                        ),
                    )
                )
                continue
            context.record_usage(reply.usage)
            context.notes.extend(reply.notes)  # e.g. a change of chat form, an empty retry
            if is_unfinished_reasoning(reply.content) and self.options is ROLE_PLAY_OPTIONS:
                self.options = REASONING_ROLE_PLAY_OPTIONS
                replies.append(reply.content)
                continue  # the same question again, now with room to think
            chosen = parse_role_play_reply(reply.content, candidates)
            if chosen is not None:
                return chosen
            replies.append(reply.content)
            visible = strip_reasoning(reply.content).strip()
            if visible:
                messages.append(
                    TextMessage(role="assistant", content=visible, sender=self.admin.name)
                )
            messages.append(
                TextMessage(
                    role="user",
                    content=(
                        f"{visible!r} does not name exactly one of the available roles. "
                        f"{_ANSWER_WITH.format(names=names)}"
                    ),
                )
            )
        fallback = _round_robin_among(candidates, context)
        context.notes.append(
            f"the admin {self.admin.name!r} did not name exactly one next speaker in "
            f"{self.max_attempts} attempt(s) (replies: {[r[:80] for r in replies]!r}; "
            f"candidates: {names}); {fallback.name!r} speaks next by round robin"
        )
        return fallback


def _round_robin_among(candidates: Sequence[Agent], context: OrchestrationContext) -> Agent:
    """The first candidate after the last sender in the members' order (wrapping around)."""
    members = list(context.candidates)
    names = [agent.name for agent in members]
    last = context.history[-1].sender if context.history else None
    start = names.index(last) + 1 if last in names else 0
    wanted = {agent.name for agent in candidates}
    for offset in range(len(members)):
        member = members[(start + offset) % len(members)]
        if member.name in wanted:
            return next(agent for agent in candidates if agent.name == member.name)
    return candidates[0]
