"""Error answers in the shapes the E2B SDK reads, one per plane.

The control plane (``/sandboxes``) and envd's HTTP API (``/files``) answer
``{"code": <status>, "message": ...}``: the SDK raises by status (401
``AuthenticationException``, 404 ``NotFoundException``, 400
``InvalidArgumentException``, 429 ``RateLimitException`` …) with the message. The code
interpreter (``/execute``, ``/contexts``) answers plain text, which the SDK puts into
its exception as it is. The Connect calls answer in :mod:`._connect`'s shape.
"""

from __future__ import annotations

from starlette.responses import JSONResponse, PlainTextResponse, Response

NOT_IMPLEMENTED = 501


def json_error(status: int, message: str) -> Response:
    """An error of the control plane or of envd's HTTP API."""
    return JSONResponse({"code": status, "message": message}, status_code=status)


def text_error(status: int, message: str) -> Response:
    """An error of the code interpreter."""
    return PlainTextResponse(message, status_code=status)


def not_implemented(what: str) -> str:
    """The message of a call outside what the server serves."""
    return (
        f"{what} is not implemented by sandcrew e2b (see docs/e2b.md for what it serves: "
        "sandboxes, run_code, contexts, files and commands)"
    )
