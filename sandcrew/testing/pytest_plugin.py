"""Pytest fixtures for code built on sandcrew agents.

Import them in a ``conftest.py``::

    from sandcrew.testing.pytest_plugin import no_real_model_requests, scripted_model_server

or load the module as a plugin (``-p sandcrew.testing.pytest_plugin``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandcrew.testing._guard import block_real_model_requests
from sandcrew.testing._server import ScriptedModelServer


@pytest.fixture
def scripted_model_server() -> Iterator[ScriptedModelServer]:
    """A started :class:`ScriptedModelServer` with an empty script (add turns in the test).

    At teardown the test fails if the server saw an unexpected request or a turn was never
    used.
    """
    server = ScriptedModelServer()
    with server:
        yield server


@pytest.fixture
def no_real_model_requests() -> Iterator[str]:
    """Send any OpenAI client that is not given a URL to a closed loopback port."""
    with block_real_model_requests() as blocked_url:
        yield blocked_url
