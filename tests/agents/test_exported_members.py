"""What sandcrew.agents and sandcrew.testing publish beyond their ``__all__`` (which
tests/test_public_surface.py checks): the error hierarchy and one shared header."""

from __future__ import annotations

import ast
from pathlib import Path

import sandcrew.agents
import sandcrew.testing
from sandcrew.agents import AmbiguousWorkflowError, FunctionCallRequiredError
from sandcrew.errors import ModelBehaviorError, UserError


def test_exported_errors_derive_from_the_product_hierarchy() -> None:
    assert issubclass(FunctionCallRequiredError, ModelBehaviorError)
    assert issubclass(AmbiguousWorkflowError, UserError)


def test_agent_header_is_defined_once_in_agents_and_reused_by_testing() -> None:
    assert sandcrew.agents.AGENT_HEADER == "X-Sandcrew-Agent"
    assert sandcrew.testing.AGENT_HEADER is sandcrew.agents.AGENT_HEADER
    testing_sources = Path(sandcrew.testing.__file__).parent.glob("*.py")
    redefined = [path.name for path in testing_sources if _assigns("AGENT_HEADER", path)]
    assert redefined == []


def _assigns(name: str, path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(target, ast.Name) and target.id == name for target in targets):
            return True
    return False
