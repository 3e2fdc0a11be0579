"""Workflow graphs: which agent may speak after which, under which condition.

A :class:`Graph` is a set of :class:`Transition` s. A transition's condition is a function
of the chat history (sync or async) returning whether the edge may be taken; conditions may
read structured message ``data`` (a review verdict, a run result), not only text.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from ._agent import Agent
from ._messages import Message

Condition = Callable[[Sequence[Message]], Awaitable[bool] | bool]
"""``(history) -> bool`` (or an awaitable of it): may this transition be taken now?"""


@dataclass(frozen=True)
class Transition:
    """An edge ``from_agent -> to_agent``, taken when ``condition`` holds (always if None)."""

    from_agent: Agent
    to_agent: Agent
    condition: Condition | None = None

    @classmethod
    def create(
        cls, from_agent: Agent, to_agent: Agent, condition: Condition | None = None
    ) -> Transition:
        return cls(from_agent, to_agent, condition)

    async def can_transition(self, history: Sequence[Message]) -> bool:
        if self.condition is None:
            return True
        outcome = self.condition(history)
        if inspect.isawaitable(outcome):
            outcome = await outcome
        return bool(outcome)

    def __repr__(self) -> str:
        suffix = "" if self.condition is None else " (conditional)"
        return f"Transition({self.from_agent.name} -> {self.to_agent.name}{suffix})"


class Graph:
    """A workflow: the transitions between a chat's agents."""

    def __init__(self, transitions: Iterable[Transition] = ()) -> None:
        self.transitions: list[Transition] = list(transitions)

    def add(self, transition: Transition) -> Graph:
        self.transitions.append(transition)
        return self

    @property
    def agent_names(self) -> list[str]:
        """Every agent name that appears in a transition, in first-seen order."""
        names: dict[str, None] = {}
        for transition in self.transitions:
            names[transition.from_agent.name] = None
            names[transition.to_agent.name] = None
        return list(names)

    async def next_agents(self, from_agent: Agent | str, history: Sequence[Message]) -> list[Agent]:
        """Every ``to`` of a transition leaving ``from_agent`` whose condition holds now."""
        name = from_agent if isinstance(from_agent, str) else from_agent.name
        found: list[Agent] = []
        for transition in self.transitions:
            if transition.from_agent.name != name:
                continue
            if await transition.can_transition(history) and all(
                agent.name != transition.to_agent.name for agent in found
            ):
                found.append(transition.to_agent)
        return found
