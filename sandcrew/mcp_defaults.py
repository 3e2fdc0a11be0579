"""The MCP server's default limits, in a module of their own: ``sandcrew mcp --help`` shows
them without importing the MCP SDK (which :mod:`sandcrew.mcp` needs)."""

MAX_SESSIONS = 4
"""Sessions one client connection may hold open at once."""
SESSION_IDLE_TIMEOUT = 600.0
"""Seconds a session may go without a call before it is closed."""
SESSION_LIFETIME = 3600.0
"""Seconds after which a session is closed, however busy."""
MAX_PENDING_PER_CLIENT = 8
"""Tool calls one client may have running or waiting at once."""
MAX_PENDING = 32
"""Tool calls all clients together may have running or waiting at once."""
CLIENT_IDLE_TIMEOUT = 60.0
"""Seconds an HTTP client's MCP session may go with no request in flight and no open event
stream before it ends (a client killed without its DELETE), closing its sandbox sessions."""
