"""The code-interpreter crew: admin, coder, reviewer (a typed function call) and runner
(a throwaway container), routed by the seed example's workflow."""

import typing

# This package's exports: type checkers read these imports; at run time each name loads
# on first use from the module the mapping below names (see sandcrew.core._lazy), and
# __all__ lists them. The two lists name the same names (tests/test_public_surface.py).
if typing.TYPE_CHECKING:
    from sandcrew.crew._admin import CompletionMiddleware as CompletionMiddleware
    from sandcrew.crew._code_facts import (
        CodeFacts as CodeFacts,
        code_to_run as code_to_run,
        inspect_code as inspect_code,
    )
    from sandcrew.crew._crew import Crew as Crew, solve_task as solve_task
    from sandcrew.crew._prompts import (
        ADMIN_PROMPT as ADMIN_PROMPT,
        CODER_PROMPT as CODER_PROMPT,
        REVIEWER_PROMPT as REVIEWER_PROMPT,
    )
    from sandcrew.crew._result import CrewResult as CrewResult
    from sandcrew.crew._review import (
        APPROVAL_TEXT as APPROVAL_TEXT,
        COMMENTS_HEADLINE as COMMENTS_HEADLINE,
        ReviewClaims as ReviewClaims,
        ReviewVerdict as ReviewVerdict,
        VerdictMiddleware as VerdictMiddleware,
        decide as decide,
        review_code_block as review_code_block,
    )
    from sandcrew.crew._runner import NO_CODE_REPLY as NO_CODE_REPLY, RunnerAgent as RunnerAgent
    from sandcrew.crew._session_sandbox import SessionSandbox as SessionSandbox
    from sandcrew.crew._settings import (
        DEFAULT_MODEL as DEFAULT_MODEL,
        CrewMode as CrewMode,
        CrewSettings as CrewSettings,
        ModelRole as ModelRole,
        ReplyTokens as ReplyTokens,
    )
    from sandcrew.crew._workflow import crew_workflow as crew_workflow
else:
    from sandcrew.core import lazy_exports as _lazy_exports

    __getattr__, __dir__ = _lazy_exports(
        __name__,
        {
            "CompletionMiddleware": "sandcrew.crew._admin",
            "CodeFacts": "sandcrew.crew._code_facts",
            "code_to_run": "sandcrew.crew._code_facts",
            "inspect_code": "sandcrew.crew._code_facts",
            "Crew": "sandcrew.crew._crew",
            "solve_task": "sandcrew.crew._crew",
            "ADMIN_PROMPT": "sandcrew.crew._prompts",
            "CODER_PROMPT": "sandcrew.crew._prompts",
            "REVIEWER_PROMPT": "sandcrew.crew._prompts",
            "CrewResult": "sandcrew.crew._result",
            "APPROVAL_TEXT": "sandcrew.crew._review",
            "COMMENTS_HEADLINE": "sandcrew.crew._review",
            "ReviewClaims": "sandcrew.crew._review",
            "ReviewVerdict": "sandcrew.crew._review",
            "VerdictMiddleware": "sandcrew.crew._review",
            "decide": "sandcrew.crew._review",
            "review_code_block": "sandcrew.crew._review",
            "NO_CODE_REPLY": "sandcrew.crew._runner",
            "RunnerAgent": "sandcrew.crew._runner",
            "SessionSandbox": "sandcrew.crew._session_sandbox",
            "DEFAULT_MODEL": "sandcrew.crew._settings",
            "CrewMode": "sandcrew.crew._settings",
            "CrewSettings": "sandcrew.crew._settings",
            "ModelRole": "sandcrew.crew._settings",
            "ReplyTokens": "sandcrew.crew._settings",
            "crew_workflow": "sandcrew.crew._workflow",
        },
    )
