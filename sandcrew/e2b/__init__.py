"""``sandcrew e2b``: an E2B-compatible server, so that the unmodified E2B SDK
(``e2b_code_interpreter``) runs its sandboxes on sandcrew's hardened sessions.

Needs ``sandcrew[e2b]`` (Starlette and uvicorn). See docs/e2b.md for what it serves.
"""

from __future__ import annotations

from sandcrew import _extras

if _extras.missing("starlette", "uvicorn"):
    raise _extras.MissingExtraError("`sandcrew e2b`", "Starlette and uvicorn", "e2b")

from sandcrew.e2b._app import API_KEY_VARIABLE, Listening, api_key_for, build_app, serve
from sandcrew.e2b._sandboxes import DEFAULT_TEMPLATE, WORKDIR, SandboxRegistry, Templates

__all__ = [
    "API_KEY_VARIABLE",
    "DEFAULT_TEMPLATE",
    "WORKDIR",
    "Listening",
    "SandboxRegistry",
    "Templates",
    "api_key_for",
    "build_app",
    "serve",
]
