"""The code-interpreter crew: admin, coder, reviewer (a typed function call) and runner
(a throwaway container), routed by the seed example's workflow."""

from sandcrew.crew._admin import CompletionMiddleware
from sandcrew.crew._code_facts import CodeFacts, code_to_run, inspect_code
from sandcrew.crew._crew import Crew, CrewResult, solve_task
from sandcrew.crew._prompts import ADMIN_PROMPT, CODER_PROMPT, REVIEWER_PROMPT
from sandcrew.crew._review import (
    APPROVAL_TEXT,
    COMMENTS_HEADLINE,
    ReviewClaims,
    ReviewVerdict,
    VerdictMiddleware,
    decide,
    review_code_block,
)
from sandcrew.crew._runner import NO_CODE_REPLY, RunnerAgent
from sandcrew.crew._settings import (
    DEFAULT_MODEL,
    CrewMode,
    CrewSettings,
    InvalidSettings,
    ModelRole,
)
from sandcrew.crew._workflow import crew_workflow

__all__ = [
    "ADMIN_PROMPT",
    "APPROVAL_TEXT",
    "CODER_PROMPT",
    "COMMENTS_HEADLINE",
    "DEFAULT_MODEL",
    "NO_CODE_REPLY",
    "REVIEWER_PROMPT",
    "CodeFacts",
    "CompletionMiddleware",
    "Crew",
    "CrewMode",
    "CrewResult",
    "CrewSettings",
    "InvalidSettings",
    "ModelRole",
    "ReviewClaims",
    "ReviewVerdict",
    "RunnerAgent",
    "VerdictMiddleware",
    "code_to_run",
    "crew_workflow",
    "decide",
    "inspect_code",
    "review_code_block",
    "solve_task",
]
