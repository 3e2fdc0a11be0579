"""The crew's workflow: the seed example's graph, with conditions on structured data.

admin → coder → reviewer → runner (approved) | coder (comments);
runner → admin (the run succeeded) | coder (it failed, or there was no code).
"""

from __future__ import annotations

from collections.abc import Sequence

from sandcrew.agents import Agent, Graph, Message, Transition
from sandcrew.crew._review import ReviewVerdict
from sandcrew.sandbox import ExecutionResult


def review_approved(history: Sequence[Message]) -> bool:
    """The last message is an approving review verdict."""
    data = history[-1].data if history else None
    return isinstance(data, ReviewVerdict) and data.approved


def review_has_comments(history: Sequence[Message]) -> bool:
    """The last message is a review verdict with comments for the coder."""
    data = history[-1].data if history else None
    return isinstance(data, ReviewVerdict) and not data.approved


def run_succeeded(history: Sequence[Message]) -> bool:
    """The last message carries a run that exited 0 in time."""
    data = history[-1].data if history else None
    return isinstance(data, ExecutionResult) and data.ok


def run_failed(history: Sequence[Message]) -> bool:
    """The last message is a failed run, or the runner found no code to run."""
    return not run_succeeded(history)


def crew_workflow(admin: Agent, coder: Agent, reviewer: Agent, runner: Agent) -> Graph:
    """The graph of the code-interpreter crew (every branch mutually exclusive)."""
    return Graph(
        [
            Transition.create(admin, coder),
            Transition.create(coder, reviewer),
            Transition.create(reviewer, runner, review_approved),
            Transition.create(reviewer, coder, review_has_comments),
            Transition.create(runner, admin, run_succeeded),
            Transition.create(runner, coder, run_failed),
        ]
    )
