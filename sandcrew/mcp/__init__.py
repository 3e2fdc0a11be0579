"""``sandcrew mcp``: sandcrew as a Model Context Protocol server (needs ``sandcrew[mcp]``).

Tools: ``run_code`` (each call in a new hardened throwaway container, within limits the
server fixes), ``list_languages``, the ``session_*`` tools (live interpreters a client keeps
between calls, closed with its connection), and ``solve`` when a model is configured.
"""

from __future__ import annotations

from sandcrew import _extras

if _extras.missing("mcp"):
    raise _extras.MissingExtraError("`sandcrew mcp`", "the MCP SDK (mcp)", "mcp")

from sandcrew.mcp._admission import QueueLimits
from sandcrew.mcp._http import AUTH_TOKEN_VARIABLE
from sandcrew.mcp._server import SERVER_NAME, Transport, build_server, limits_of, serve
from sandcrew.mcp._toolbox import SandboxToolbox
from sandcrew.mcp._tools import LanguagesResult, ServerLimits

__all__ = [
    "AUTH_TOKEN_VARIABLE",
    "SERVER_NAME",
    "LanguagesResult",
    "QueueLimits",
    "SandboxToolbox",
    "ServerLimits",
    "Transport",
    "build_server",
    "limits_of",
    "serve",
]
