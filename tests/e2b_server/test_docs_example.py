"""docs/e2b.md's example runs as written, as a program of its own, against the server."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from e2b_code_interpreter import Sandbox

from tests.e2b_server.helpers import E2bServer
from tests.test_readme_examples import section_blocks

pytestmark = pytest.mark.docker


def test_the_run_e2b_code_example_prints_what_it_says(e2b_env: E2bServer) -> None:
    (code,) = section_blocks("e2b.md", "Run E2B code")
    completed = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **e2b_env.environment()},
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == [
        "['hello\\n'] 42",
        "2 data.csv",
        "",
        "['text', 'png']",
    ]


def test_sandboxes_are_listed(e2b_env: E2bServer) -> None:
    with Sandbox.create(metadata={"purpose": "listing"}) as sandbox:
        listed = Sandbox.list().next_items()
        mine = [info for info in listed if info.sandbox_id == sandbox.sandbox_id]
        assert len(mine) == 1
        assert mine[0].metadata == {"purpose": "listing"}
