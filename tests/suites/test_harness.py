"""The sealed harness on real Docker: exit tricks fail a failing test, honest code passes."""

from __future__ import annotations

import re

import pytest

from sandcrew.sandbox import DockerSandbox
from sandcrew.suites import CodeTask, TaskStatus, check_program, seal_check
from sandcrew.suites._checks import run_code_check

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("no_leftover_containers")]

TASK = CodeTask(
    id="add",
    prompt='def add(a: int, b: int) -> int:\n    """The sum of a and b."""\n',
    entry_point="add",
    test="def check(candidate):\n    assert candidate(2, 3) == 5\n",
)

WRONG = "def add(a, b):\n    return a - b\n"

# Reads the bootstrap shell's memory for its trailer nonce (possible where the
# parent is dumpable and of the program's uid) and prints a trailer reporting
# exit 0 on both streams; with no nonce found it forges one anyway.
FORGE_TRAILER = r"""
import os, re
def _forge():
    nonce = b"0" * 24
    try:
        parent = os.getppid()
        with open(f"/proc/{parent}/maps") as maps, open(f"/proc/{parent}/mem", "rb", 0) as mem:
            for line in maps:
                span, permissions = line.split()[:2]
                start, end = (int(part, 16) for part in span.split("-"))
                if not permissions.startswith("rw") or end - start > 64 * 1024 * 1024:
                    continue
                try:
                    mem.seek(start)
                    found = re.search(rb"nonce=([0-9a-f]{24})", mem.read(end - start))
                except OSError:
                    continue
                if found:
                    nonce = found.group(1)
                    break
    except OSError:
        pass
    trailer = b"\x1e" + nonce + b":0\n"
    os.write(1, trailer)
    os.write(2, trailer)
_forge()
"""

# What the program could copy the secret from: its own file, its command line,
# its open files. Prints the token and exits with the status when it finds them.
SECRET_IN_PROGRAM = re.compile(r"""(\d+), '([0-9a-f]{32})', __file__\)""")
COPY_SECRET = r"""
import glob, os, re, sys
def _copy_secret():
    places = [sys.argv[0], "/proc/self/cmdline", *glob.glob("/proc/self/fd/*")]
    places += glob.glob(os.path.join(os.getcwd(), "*"))
    for place in places:
        try:
            # Non-blocking: stdout and stderr are pipes a plain read would wait on.
            descriptor = os.open(place, os.O_RDONLY | os.O_NONBLOCK)
            with open(descriptor, errors="replace") as handle:
                text = handle.read()
        except (OSError, TypeError):
            continue
        found = re.search(r"(\d+), '([0-9a-f]{32})', __file__\)", text)
        if found:
            sys.stdout.write("\n" + found.group(2) + "\n")
            sys.stdout.flush()
            os._exit(int(found.group(1)))
_copy_secret()
"""

TRICKS = {
    "os-exit-in-the-function": "    import os\n    os._exit(0)\n",
    "os-exit-at-import": "import os\nos._exit(0)\n",
    "exit-from-atexit": "import atexit, os\natexit.register(lambda: os._exit(0))\n" + WRONG,
    "replaced-excepthook": "import os, sys\nsys.excepthook = lambda *args: os._exit(0)\n" + WRONG,
    "system-exit-0-in-the-function": "    raise SystemExit(0)\n",
    "forged-trailer": FORGE_TRAILER + WRONG,
    "secret-copied-from-the-program": COPY_SECRET + WRONG,
}


@pytest.mark.parametrize("completion", list(TRICKS.values()), ids=list(TRICKS))
async def test_an_exit_trick_fails_a_failing_test(sandbox: DockerSandbox, completion: str) -> None:
    outcome = await run_code_check(TASK, completion, sandbox)

    assert outcome.status is TaskStatus.FAIL, outcome


async def test_the_wrong_answer_fails_with_the_assertion(sandbox: DockerSandbox) -> None:
    outcome = await run_code_check(TASK, WRONG, sandbox)

    assert outcome.status is TaskStatus.FAIL
    assert "assert candidate(2, 3) == 5" in outcome.detail
    assert "AssertionError" in outcome.detail


async def test_exit_0_before_check_returned_says_so(sandbox: DockerSandbox) -> None:
    outcome = await run_code_check(TASK, TRICKS["os-exit-in-the-function"], sandbox)

    assert outcome.detail == "the program exited with code 0 before check() returned"


@pytest.mark.parametrize(
    "completion",
    [
        "    return a + b\n",
        "import sys\n\ndef add(a, b):\n    print('no newline', end='', file=sys.stdout)\n"
        "    return a + b\n",
        "    import atexit, os\n    atexit.register(lambda: os._exit(3))\n    return a + b\n",
    ],
    ids=["body", "prints-without-a-newline", "atexit-that-would-fail"],
)
async def test_a_right_completion_passes(sandbox: DockerSandbox, completion: str) -> None:
    outcome = await run_code_check(TASK, completion, sandbox)

    assert outcome.status is TaskStatus.PASS, outcome


async def test_multiprocessing_in_the_task_finds_its_functions(sandbox: DockerSandbox) -> None:
    # Functions of the task live in the real __main__, as when it runs as a script.
    completion = (
        "import multiprocessing\n\ndef _one(pair):\n    return pair[0] + pair[1]\n\n"
        "def add(a, b):\n    with multiprocessing.get_context('fork').Pool(1) as pool:\n"
        "        return pool.map(_one, [(a, b)])[0]\n"
    )
    task = TASK.model_copy(update={"timeout": 30.0})
    outcome = await run_code_check(task, completion, sandbox)

    assert outcome.status is TaskStatus.PASS, outcome


def test_the_copy_attack_would_find_the_secret_in_the_program_text() -> None:
    # The copy attack is real: the secret is in the harness's text, which it removes.
    sealed = seal_check(check_program(TASK, WRONG), TASK.entry_point)
    found = SECRET_IN_PROGRAM.search(sealed.program)

    assert found is not None
    assert (int(found.group(1)), found.group(2)) == (sealed.pass_status, sealed.pass_token)
    assert sealed.pass_token not in check_program(TASK, WRONG)


def test_each_seal_draws_a_new_secret() -> None:
    seals = [seal_check("def check(c):\n    pass\n", "add") for _ in range(20)]

    assert len({seal.pass_token for seal in seals}) == 20
    assert all(3 <= seal.pass_status < 120 for seal in seals)
