"""Rewrite the golden OpenAI tool definitions on purpose.

Run ``python -m tests.functions.regenerate_golden`` (or this file as a script) from the
repository root after an intended change to the rendered schemas, then review the diff.
"""

import json
import sys
from pathlib import Path

if __package__:
    from tests.functions.golden_functions import GOLDEN_TOOLS, golden_file_name
else:  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.functions.golden_functions import GOLDEN_TOOLS, golden_file_name

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


def render_golden() -> dict[str, str]:
    """File name → file text, for every kept rendering."""
    files = {}
    for tool, modes in GOLDEN_TOOLS:
        for strict in modes:
            text = json.dumps(
                tool.contract.to_openai_tool(strict=strict), indent=2, ensure_ascii=False
            )
            files[golden_file_name(tool, strict)] = text + "\n"
    return files


def main() -> None:
    GOLDEN_DIR.mkdir(exist_ok=True)
    files = render_golden()
    for stale in GOLDEN_DIR.glob("*.json"):
        if stale.name not in files:
            stale.unlink()
            print(f"removed {stale.name}")
    for name, text in files.items():
        (GOLDEN_DIR / name).write_text(text, encoding="utf-8")
        print(f"wrote {name}")


if __name__ == "__main__":
    main()
