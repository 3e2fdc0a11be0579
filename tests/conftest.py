"""Project-wide test settings: hermetic environment, no real model ever reached."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Variables that would point the product at a real model or change its defaults.
_PRODUCT_VARIABLE_PREFIXES = ("OPENAI_", "AZURE_OPENAI_", "SANDCREW_")


@pytest.fixture(scope="session")
def empty_config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("config") / "config.toml"
    path.write_text("")
    return path


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch, empty_config_file: Path) -> None:
    """Strip model and product settings so that no test depends on the host's."""
    for name in list(os.environ):
        if name.startswith(_PRODUCT_VARIABLE_PREFIXES):
            monkeypatch.delenv(name)
    # Not the developer's ~/.config/sandcrew/config.toml either.
    monkeypatch.setenv("SANDCREW_CONFIG", str(empty_config_file))
    # A test that forgets to point at the scripted server must fail, not reach a model.
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
