"""A cell's events as the E2B code interpreter's ``/execute`` answer: one JSON object a line.

The SDK (``e2b_code_interpreter``) reads each line by its ``type``: ``stdout`` and
``stderr`` with ``text`` and a ``timestamp`` (Unix nanoseconds), ``result`` with one
field per MIME type it knows (``text``, ``html``, ``png`` as base64 …) and
``is_main_result``, ``error`` with ``name``, ``value`` and ``traceback``, and
``number_of_executions`` with the cell's ``execution_count``. Pure functions over
sandcrew's session events, tested line by line (tests/e2b_server/test_wire.py).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

from sandcrew.sandbox import CellResult, DisplayOutput, OutputEvent, SessionEvent

RESULT_FIELDS: dict[str, str] = {
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "text/latex": "latex",
    "application/json": "json",
    "application/javascript": "javascript",
}
"""MIME type → the field of the SDK's ``Result``; other types go into its ``extra``."""

TIMED_OUT_ERROR = "TimeoutError"
LOST_STATE_ERROR = "InterpreterRestarted"


def line(message: dict[str, Any]) -> bytes:
    """One line of the answer. A program's text may hold lone surrogates (``"\\ud800"``):
    they go as JSON escapes, which UTF-8 cannot carry as they are."""
    text = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", errors="backslashreplace") + b"\n"


def encode_event(event: SessionEvent, *, clock: Callable[[], int] = time.time_ns) -> bytes:
    """The lines of one session event (output, a display output, or the cell's result)."""
    if isinstance(event, OutputEvent):
        return line({"type": event.stream, "text": event.text, "timestamp": clock()})
    if isinstance(event, DisplayOutput):
        return line(result_message(event))
    return b"".join(line(message) for message in closing_messages(event, clock=clock))


def error_line(name: str, value: str) -> bytes:
    """An error of the cell's request rather than of its code (refused, sandbox ended)."""
    return line({"type": "error", "name": name, "value": value, "traceback": ""})


def result_message(output: DisplayOutput) -> dict[str, Any]:
    """A display output as the SDK's ``result`` line."""
    message: dict[str, Any] = {"type": "result"}
    extra: dict[str, Any] = {}
    for media_type, value in output.data.items():
        field = RESULT_FIELDS.get(media_type)
        text = base64.b64encode(value).decode() if isinstance(value, bytes) else value
        if field == "json":
            try:
                message["json"] = json.loads(text)
            except ValueError:
                extra[media_type] = text
        elif field is not None:
            message[field] = text
        else:
            extra[media_type] = text
    if extra:
        message["extra"] = extra
    message["is_main_result"] = output.kind == "result"
    return message


def closing_messages(
    result: CellResult, *, clock: Callable[[], int] = time.time_ns
) -> list[dict[str, Any]]:
    """What ends the answer: the sandbox's notes (stderr), the error if the cell failed,
    then the execution count."""
    messages: list[dict[str, Any]] = [
        {"type": "stderr", "text": note + "\n", "timestamp": clock()} for note in result.notes()
    ]
    if result.error is not None:
        messages.append(
            {
                "type": "error",
                "name": result.error.name,
                "value": result.error.value,
                "traceback": result.error.traceback,
            }
        )
    elif result.timed_out:
        messages.append(
            {
                "type": "error",
                "name": TIMED_OUT_ERROR,
                "value": "the cell ran past the server's limit and was interrupted "
                "(variables kept)",
                "traceback": "",
            }
        )
    elif result.state_lost:
        messages.append(
            {
                "type": "error",
                "name": LOST_STATE_ERROR,
                "value": f"the interpreter was restarted: {result.reason or 'it ended'}; "
                "variables are gone, files kept",
                "traceback": "",
            }
        )
    if result.execution_count is not None:
        messages.append({"type": "number_of_executions", "execution_count": result.execution_count})
    return messages
