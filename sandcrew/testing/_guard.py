"""Keep tests away from real model endpoints."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

GUARDED_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID")


def closed_loopback_url() -> str:
    """A ``http://127.0.0.1:PORT/v1`` URL where nothing listens (connections are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@contextmanager
def block_real_model_requests() -> Iterator[str]:
    """Point ``OPENAI_BASE_URL`` at a closed loopback port and remove API keys for the block.

    Any client that is not explicitly given a scripted server's URL then fails to connect
    instead of reaching (and paying) a real model. Yields the blocked URL; the previous
    environment is restored afterwards.
    """
    saved = {name: os.environ.get(name) for name in GUARDED_VARIABLES}
    blocked = closed_loopback_url()
    for name in GUARDED_VARIABLES:
        os.environ.pop(name, None)
    os.environ["OPENAI_BASE_URL"] = blocked
    try:
        yield blocked
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
