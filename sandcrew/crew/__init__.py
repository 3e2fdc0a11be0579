"""The code-interpreter crew: admin, coder, reviewer (a typed function call) and runner
(a throwaway container), routed by the seed example's workflow."""

import typing

# Type checkers read the imports; at run time each name loads on first use, so a
# program pays only for the modules it touches.
if typing.TYPE_CHECKING:
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
    from sandcrew.crew._session_sandbox import SessionSandbox
    from sandcrew.crew._settings import (
        DEFAULT_MODEL,
        CrewMode,
        CrewSettings,
        InvalidSettings,
        ModelRole,
    )
    from sandcrew.crew._workflow import crew_workflow
else:
    from sandcrew.core import lazy_exports as _lazy_exports

    __getattr__, __dir__ = _lazy_exports(
        __name__,
        {
            "CompletionMiddleware": "._admin",
            "CodeFacts": "._code_facts",
            "code_to_run": "._code_facts",
            "inspect_code": "._code_facts",
            "Crew": "._crew",
            "CrewResult": "._crew",
            "solve_task": "._crew",
            "ADMIN_PROMPT": "._prompts",
            "CODER_PROMPT": "._prompts",
            "REVIEWER_PROMPT": "._prompts",
            "APPROVAL_TEXT": "._review",
            "COMMENTS_HEADLINE": "._review",
            "ReviewClaims": "._review",
            "ReviewVerdict": "._review",
            "VerdictMiddleware": "._review",
            "decide": "._review",
            "review_code_block": "._review",
            "NO_CODE_REPLY": "._runner",
            "RunnerAgent": "._runner",
            "SessionSandbox": "._session_sandbox",
            "DEFAULT_MODEL": "._settings",
            "CrewMode": "._settings",
            "CrewSettings": "._settings",
            "InvalidSettings": "._settings",
            "ModelRole": "._settings",
            "crew_workflow": "._workflow",
        },
    )

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
    "SessionSandbox",
    "VerdictMiddleware",
    "code_to_run",
    "crew_workflow",
    "decide",
    "inspect_code",
    "review_code_block",
    "solve_task",
]
