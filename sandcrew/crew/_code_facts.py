"""What can be proven about the coder's message from the code itself, without a model."""

from __future__ import annotations

import ast

from pydantic import BaseModel, ConfigDict

from sandcrew.agents import strip_reasoning
from sandcrew.sandbox.code import CodeBlock, extract_code_blocks

RUNNABLE_LANGUAGES = ("python", "bash", "javascript")


class CodeFacts(BaseModel):
    """Facts about the code blocks of one coder message.

    ``prints_result`` and ``top_level`` are judged from the syntax tree for Python
    (a call to ``print``/``sys.stdout.write``; a statement that runs at module
    level) and from the commands for bash; they are ``None`` when not provable.
    """

    model_config = ConfigDict(frozen=True)

    block_count: int
    language: str | None
    """Normalized language of the program that would run (an untagged block that parses as
    Python counts as Python)."""
    joined: bool = False
    """Several Python blocks were joined into one program (definitions, then their use)."""
    syntax_error: str | None = None
    """Why the code does not parse (Python only), e.g. ``line 3: invalid syntax``."""
    top_level: bool | None = None
    prints_result: bool | None = None

    @property
    def has_multiple_code_blocks(self) -> bool:
        """Several blocks that do not form one program unambiguously."""
        return self.block_count > 1 and not self.joined

    @property
    def is_runnable_language(self) -> bool:
        return self.language in RUNNABLE_LANGUAGES

    @property
    def parses(self) -> bool:
        return self.block_count > 0 and self.syntax_error is None


def code_to_run(text: str) -> CodeBlock | None:
    """The program the runner runs from a coder message (None without a code block).

    What is unambiguous runs, the way coders actually write: the only block; an untagged
    block that parses as Python (as Python); several Python blocks where the earlier ones
    only define things (functions, classes, imports) and all of them parse together (one
    program); otherwise the last block.
    """
    return _program(text)[0]


def _program(text: str) -> tuple[CodeBlock | None, int, bool]:
    """The program to run, how many blocks the message has, and whether they were joined."""
    blocks = [_resolved(block) for block in extract_code_blocks(strip_reasoning(text))]
    if not blocks:
        return None, 0, False
    if len(blocks) > 1:
        joined = _joined_program(blocks)
        if joined is not None:
            return joined, len(blocks), True
    return blocks[-1], len(blocks), False


def _resolved(block: CodeBlock) -> CodeBlock:
    """An untagged block that parses as Python is Python."""
    if block.language is None and _parses(block.code):
        return block.model_copy(update={"language": "python"})
    return block


def _joined_program(blocks: list[CodeBlock]) -> CodeBlock | None:
    if any(block.language != "python" for block in blocks):
        return None
    for block in blocks[:-1]:
        try:
            tree = ast.parse(block.code)
        except SyntaxError:
            return None
        if _runs_at_module_level(tree):
            return None  # an earlier block does work of its own: not just definitions
    code = "\n\n".join(block.code.rstrip("\n") for block in blocks) + "\n"
    if not _parses(code):
        return None
    return CodeBlock(code=code, language="python", info=f"python ({len(blocks)} blocks joined)")


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return bool(code.strip())


def inspect_code(text: str) -> CodeFacts:
    """Compute the provable facts of a coder message."""
    program, block_count, joined = _program(text)
    if program is None:
        return CodeFacts(block_count=0, language=None)
    if program.language == "python":
        return _python_facts(block_count, program.code, joined=joined)
    if program.language == "bash":
        prints = any(word in program.code for word in ("echo", "printf", "cat "))
        return CodeFacts(
            block_count=block_count, language="bash", top_level=True, prints_result=prints
        )
    return CodeFacts(block_count=block_count, language=program.language)


def _python_facts(block_count: int, code: str, *, joined: bool) -> CodeFacts:
    try:
        tree = ast.parse(code)
    except SyntaxError as error:
        where = f"line {error.lineno}: " if error.lineno else ""
        return CodeFacts(
            block_count=block_count,
            language="python",
            joined=joined,
            syntax_error=f"{where}{error.msg}",
        )
    return CodeFacts(
        block_count=block_count,
        language="python",
        joined=joined,
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
