"""The crew tests' script for :class:`sandcrew.testing.ScriptedSandbox`: what the Fibonacci
programs "did"."""

from __future__ import annotations

from collections.abc import Mapping

from sandcrew.testing import ScriptedRun, ScriptedSandbox

FIBONACCI_OUTCOMES: Mapping[str, ScriptedRun] = {
    "print(fibonacci(39))": ScriptedRun(stdout="63245986\n"),
    "print(fib(39))": ScriptedRun(
        exit_code=1,
        stderr='Traceback (most recent call last):\n  File "<main>", line 1, in <module>\n'
        "NameError: name 'fib' is not defined\n",
    ),
    "echo $((6 * 7))": ScriptedRun(stdout="42\n"),
}


def fibonacci_sandbox() -> ScriptedSandbox:
    return ScriptedSandbox(FIBONACCI_OUTCOMES, languages=("python", "bash"))
