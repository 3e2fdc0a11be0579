"""The container command that runs one of the in-container programs of :mod:`._inside`.

The image holds nothing of ours, so the package's modules travel in the command
itself: a short bootstrap, run as ``python3 -I -S -c`` (isolated, no site: nothing
of the image's environment or site-packages runs as root), puts a finder on
``sys.meta_path`` that serves those sources as the package ``sandcrew_inside``
and calls ``main(arguments)`` of the entry module. Compiling them costs what the
former single ``-c`` text cost; nothing is written into the container. The sources
travel zlib-compressed (base64 in the argument): the engine stores and hands on the
command at each create and start, and the supervisor's 50 KB of plain source cost a
cold run ~14 ms there against its 21 KB packed.
"""

from __future__ import annotations

import binascii
import re
import zlib
from functools import cache
from pathlib import Path

INSIDE_PACKAGE = "sandcrew_inside"
"""The package name the in-container modules get inside the container."""

_SOURCE_FOLDER = Path(__file__).resolve().parent / "_inside"
# One argument may hold at most 128 KiB on Linux (MAX_ARG_STRLEN).
_ARGUMENT_LIMIT = 128 * 1024

_BOOTSTRAP = """\
import binascii, sys, zlib
ModuleSpec = type(sys.__spec__)  # importlib.machinery's, without importing importlib
PACKED = zlib.decompress(binascii.a2b_base64({packed!r})).decode().split("\\0")
SOURCES = dict(zip(PACKED[::2], PACKED[1::2]))


class InsideModules:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        package, _, module = name.partition(".")
        if package != {package!r} or module not in SOURCES:
            return None
        return ModuleSpec(name, cls, is_package=False)

    @staticmethod
    def create_module(spec):
        return None

    @staticmethod
    def exec_module(module):
        short = module.__name__.partition(".")[2]
        code = compile(SOURCES[short], "<sandcrew_inside/" + short + ".py>", "exec")
        exec(code, module.__dict__)


package = type(sys)({package!r})
package.__spec__ = ModuleSpec({package!r}, None, is_package=True)
package.__path__ = []
sys.modules[{package!r}] = package
sys.meta_path.insert(0, InsideModules)
from {package}.{entry} import main

main(sys.argv[1:])
"""


# The sibling imports of an in-container module (they are relative, one per line, at the
# top or inside a function): "from .name import ..." or "from . import name".
_SIBLING_IMPORT = re.compile(r"^[ \t]*from \.(?:(\w+) import| import (\w+))", re.MULTILINE)


@cache
def _sources() -> dict[str, str]:
    return {
        path.stem: path.read_text(encoding="utf-8")
        for path in sorted(_SOURCE_FOLDER.glob("*.py"))
        if path.stem != "__init__"
    }


def _needed(entry: str, sources: dict[str, str]) -> dict[str, str]:
    """The sources of ``entry`` and of the siblings it imports, directly or not: only they
    travel (the interpreter parses the whole command at every container's start)."""
    needed: dict[str, str] = {}
    waiting = [entry]
    while waiting:
        name = waiting.pop()
        if name not in needed:
            needed[name] = sources[name]
            waiting.extend(
                module or sibling for module, sibling in _SIBLING_IMPORT.findall(sources[name])
            )
    return dict(sorted(needed.items()))


@cache
def _bootstrap(entry: str) -> str:
    sources = _sources()
    if entry not in sources:
        raise ValueError(f"no in-container module {entry!r} (have: {', '.join(sources)})")
    needed = _needed(entry, sources)
    # Each name, then its source, separated by NUL (which no Python source holds).
    packed = zlib.compress("\0".join(part for item in needed.items() for part in item).encode())
    text = _BOOTSTRAP.format(
        packed=binascii.b2a_base64(packed, newline=False).decode("ascii"),
        package=INSIDE_PACKAGE,
        entry=entry,
    )
    if len(text.encode()) >= _ARGUMENT_LIMIT:
        raise ValueError(f"the in-container modules are too large for one argument ({len(text)})")
    return text


def inside_command(entry: str, *arguments: str) -> list[str]:
    """``python3 -I -S -c <bootstrap> ARGUMENTS``: runs ``_inside.<entry>.main(ARGUMENTS)``."""
    return ["python3", "-I", "-S", "-c", _bootstrap(entry), *arguments]
