"""Fixtures of the sandbox tests (the Docker fixtures and ``sandbox`` live in tests/conftest.py)."""

from __future__ import annotations

from tests.sandbox.helpers import SANDBOX_IMAGE

IMAGE = SANDBOX_IMAGE
