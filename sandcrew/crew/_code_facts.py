"""What can be proven about the coder's message from the code itself, without a model."""

from __future__ import annotations

import ast

from pydantic import BaseModel, ConfigDict

from sandcrew.sandbox import CodeBlock, extract_code_blocks

RUNNABLE_LANGUAGES = ("python", "bash")


class CodeFacts(BaseModel):
    """Facts about the code blocks of one coder message.

    ``prints_result`` and ``top_level`` are judged from the syntax tree for Python
    (a call to ``print``/``sys.stdout.write``; a statement that runs at module
    level) and from the commands for bash; they are ``None`` when not provable.
    """

    model_config = ConfigDict(frozen=True)

    block_count: int
    language: str | None
    """Normalized language of the block that would run (the last one)."""
    syntax_error: str | None = None
    """Why the code does not parse (Python only), e.g. ``line 3: invalid syntax``."""
    top_level: bool | None = None
    prints_result: bool | None = None

    @property
    def has_multiple_code_blocks(self) -> bool:
        return self.block_count > 1

    @property
    def is_runnable_language(self) -> bool:
        return self.language in RUNNABLE_LANGUAGES

    @property
    def parses(self) -> bool:
        return self.block_count > 0 and self.syntax_error is None


def code_to_run(text: str) -> CodeBlock | None:
    """The block the runner runs: the last fenced block of the message (None without one)."""
    blocks = extract_code_blocks(text)
    return blocks[-1] if blocks else None


def inspect_code(text: str) -> CodeFacts:
    """Compute the provable facts of a coder message."""
    blocks = extract_code_blocks(text)
    if not blocks:
        return CodeFacts(block_count=0, language=None)
    block = blocks[-1]
    if block.language == "python":
        return _python_facts(len(blocks), block.code)
    if block.language == "bash":
        prints = any(word in block.code for word in ("echo", "printf", "cat "))
        return CodeFacts(
            block_count=len(blocks), language="bash", top_level=True, prints_result=prints
        )
    return CodeFacts(block_count=len(blocks), language=block.language)


def _python_facts(block_count: int, code: str) -> CodeFacts:
    try:
        tree = ast.parse(code)
    except SyntaxError as error:
        where = f"line {error.lineno}: " if error.lineno else ""
        return CodeFacts(
            block_count=block_count, language="python", syntax_error=f"{where}{error.msg}"
        )
    return CodeFacts(
        block_count=block_count,
        language="python",
        top_level=_runs_at_module_level(tree),
        prints_result=_prints(tree),
    )


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)


def _runs_at_module_level(tree: ast.Module) -> bool:
    """True when some module-level statement does work (not only defs, imports, docstring)."""
    for statement in tree.body:
        if isinstance(statement, _DEFINITIONS):
            continue
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # a docstring or a bare literal does nothing
        return True
    return False


def _prints(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Name) and function.id in {"print", "pprint"}:
            return True
        if isinstance(function, ast.Attribute) and function.attr in {"write", "pprint"}:
            return True
    return False
