"""Each optional integration names the extra that brings its framework when it is missing."""

from __future__ import annotations

import subprocess
import sys

import pytest

# A module set to None in sys.modules cannot be imported: the framework looks uninstalled.
_HIDE = "import sys\nsys.modules[{module!r}] = None\n"


@pytest.mark.parametrize(
    ("hidden", "statement", "extra"),
    [
        ("autogen_core", "import sandcrew.integrations.autogen", "autogen"),
        ("ag2.tools.sandbox", "import sandcrew.integrations.ag2", "ag2"),
        ("mcp", "import sandcrew.mcp", "mcp"),
    ],
    ids=["autogen", "ag2", "mcp"],
)
def test_a_missing_framework_is_an_import_error_naming_the_extra(
    hidden: str, statement: str, extra: str
) -> None:
    script = _HIDE.format(module=hidden) + (
        f"try:\n    {statement}\nexcept ImportError as error:\n    print(error)\n"
    )

    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )

    assert f"pip install 'sandcrew[{extra}]'" in completed.stdout


def test_sandcrew_mcp_without_the_sdk_says_which_extra_to_install() -> None:
    script = _HIDE.format(module="mcp") + (
        "sys.argv = ['sandcrew', 'mcp']\nfrom sandcrew.cli import main\nmain()\n"
    )

    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)

    assert completed.returncode == 2
    assert completed.stderr.strip() == (
        "error: `sandcrew mcp` needs the MCP SDK (mcp): pip install 'sandcrew[mcp]'"
    )


def test_importing_the_integrations_package_imports_no_framework() -> None:
    script = (
        "import sys, sandcrew.integrations, sandcrew.cli\n"
        "print(sorted(m for m in ('mcp', 'autogen_core', 'ag2') if m in sys.modules))\n"
    )

    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )

    assert completed.stdout.strip() == "[]"
