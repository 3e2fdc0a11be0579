"""The sessions example of docs/sessions.md runs as written and prints what it says."""

from __future__ import annotations

import pytest

from tests.test_readme_examples import REPOSITORY, block_after, run_python


@pytest.mark.docker
def test_the_session_example_runs() -> None:
    example = block_after(REPOSITORY / "docs" / "sessions.md", "## Sessions: a live interpreter")

    completed = run_python(example)

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == ["total 12", "24", "b'12\\n'", "True False", "12"]
