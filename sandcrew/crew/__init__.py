"""The code-interpreter crew: admin, coder, reviewer (a typed function call) and runner
(a throwaway container), routed by the seed example's workflow."""

import typing

# The one list of this package's exports: type checkers read these imports; at run
# time each name loads on first use (see sandcrew.core._lazy), and __all__ lists them.
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

    __getattr__, __dir__ = _lazy_exports(__name__)
