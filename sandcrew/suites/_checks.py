"""Deciding whether an answer or a completion passes.

Answer checks are pure functions on text. Code checks build one program from
the task and the completion, wrap it in the sealed harness (:mod:`._harness`)
and run it in a fresh container of the sandbox.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

from sandcrew.suites._harness import SealedCheck, seal_check
from sandcrew.suites._outcomes import TaskOutcome, TaskStatus
from sandcrew.suites._tasks import AnswerTask, CodeTask, ExactAnswer, NumberAnswer, RegexAnswer

if TYPE_CHECKING:
    from sandcrew.sandbox import ExecutionResult, Sandbox

DETAIL_CHARS = 300
"""Characters of stderr (its tail) kept as a failing task's detail."""
OUTPUT_CHARS = 4000
"""Characters of a check's output (its tail) kept in the report."""

# Integers with thousands separators ("63,245,986") or plain digits, optional
# fraction and exponent. A list such as "1,2,3" stays three numbers.
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")


def numbers_in(text: str) -> list[Decimal]:
    """Every number written in ``text``, in order."""
    found: list[Decimal] = []
    for match in _NUMBER.finditer(text):
        try:
            found.append(Decimal(match.group().replace(",", "")))
        except InvalidOperation:  # pragma: no cover - the pattern only matches numbers
            continue
    return found


def answer_matches(expected: ExactAnswer | NumberAnswer | RegexAnswer, text: str) -> bool:
    """Whether ``text`` holds the expected answer.

    exact: equal once surrounding whitespace is stripped; number: any number in
    the text within the tolerance; regex: found anywhere (``re.search``).
    """
    if isinstance(expected, ExactAnswer):
        return text.strip() == expected.exact.strip()
    if isinstance(expected, NumberAnswer):
        return any(abs(value - expected.number) <= expected.tolerance for value in numbers_in(text))
    return re.search(expected.regex, text) is not None


def describe_expected(expected: ExactAnswer | NumberAnswer | RegexAnswer) -> str:
    """A short phrase such as ``the number 63245986`` for failure details."""
    if isinstance(expected, ExactAnswer):
        return f"exactly {expected.exact!r}"
    if isinstance(expected, NumberAnswer):
        around = f" ± {expected.tolerance}" if expected.tolerance else ""
        return f"the number {expected.number}{around}"
    return f"a match of /{expected.regex}/"


def check_program(task: CodeTask, completion: str) -> str:
    """The task's code the harness runs before it calls ``check``: prompt, completion, tests.

    A completion is normally the body of the prompt's function. A completion
    that defines the whole function itself (as chat models tend to write it)
    follows the prompt closed by a ``pass`` body, so that the prompt's imports
    and helpers still apply and the completion's definition wins. The harness
    (:func:`seal_check`) then calls ``check(entry_point)`` itself.
    """
    if _defines_function(completion, task.entry_point):
        newline = "" if task.prompt.endswith("\n") else "\n"
        completion = f"{newline}    pass\n\n\n{completion}"
    return f"{task.prompt}{completion}\n\n{task.test}\n"


def _defines_function(code: str, name: str) -> bool:
    pattern = rf"^(?:async\s+)?def\s+{re.escape(name)}\s*\("
    return re.search(pattern, code, flags=re.MULTILINE) is not None


def check_answer(task: AnswerTask, *candidates: str | None) -> TaskOutcome:
    """Pass when any of the candidate texts holds the expected answer."""
    texts = [text for text in candidates if text is not None]
    output = _tail(texts[0], OUTPUT_CHARS) if texts else ""
    if any(answer_matches(task.expected, text) for text in texts):
        return TaskOutcome(status=TaskStatus.PASS, output=output)
    shown = _tail(texts[0].strip(), 120) if texts else "nothing"
    return TaskOutcome(
        status=TaskStatus.FAIL,
        detail=f"expected {describe_expected(task.expected)}, got {shown!r}",
        output=output,
    )


async def run_code_check(task: CodeTask, completion: str, sandbox: Sandbox) -> TaskOutcome:
    """Run ``completion`` against the tests of ``task`` in a fresh container, under the harness.

    Passes only when the run ends with the harness's pass status and token,
    which it produces after ``check()`` returned (see :mod:`._harness`).
    """
    sealed = seal_check(check_program(task, completion), task.entry_point)
    result = await sandbox.run(sealed.program, "python", timeout=task.timeout)
    return sealed_outcome(sealed, result)


def sealed_outcome(sealed: SealedCheck, result: ExecutionResult) -> TaskOutcome:
    """pass only with the harness's evidence; timeout when killed at the deadline; else fail."""
    if result.timed_out or result.oom_killed:
        return outcome_of_run(result)
    # The pass token is the harness's, not the task's output.
    output = run_output(result, drop_suffix=sealed.token_line)
    if sealed.passed(result.exit_code, result.stdout):
        return TaskOutcome(status=TaskStatus.PASS, container_runs=1, output=output)
    if result.exit_code == sealed.pass_status and result.stdout_truncated:
        detail = (
            "the program printed more than the sandbox keeps, which cut off the "
            "harness's evidence that check() returned"
        )
    elif result.exit_code == 0:
        detail = _tail(result.stderr.strip(), DETAIL_CHARS) or (
            "the program exited with code 0 before check() returned"
        )
    else:
        detail = _tail(result.stderr.strip(), DETAIL_CHARS) or f"exit code {result.exit_code}"
    return TaskOutcome(status=TaskStatus.FAIL, container_runs=1, detail=detail, output=output)


async def run_answer_program(task: AnswerTask, code: str, sandbox: Sandbox) -> TaskOutcome:
    """Run ``code`` in a fresh container; pass when it exits 0 printing the answer."""
    result = await sandbox.run(code, "python", timeout=task.timeout)
    if not result.ok:
        return outcome_of_run(result)
    return check_answer(task, result.stdout).model_copy(
        update={"container_runs": 1, "output": run_output(result)}
    )


def outcome_of_run(result: ExecutionResult) -> TaskOutcome:
    """pass on exit 0 (answer programs); timeout when the deadline killed it; fail otherwise."""
    output = run_output(result)
    if result.timed_out:
        return TaskOutcome(
            status=TaskStatus.TIMEOUT,
            container_runs=1,
            detail=f"timed out after {result.timeout:g}s",
            output=output,
        )
    if result.ok:
        return TaskOutcome(status=TaskStatus.PASS, container_runs=1, output=output)
    if result.oom_killed:
        detail = "killed: out of memory"
    else:
        detail = _tail(result.stderr.strip(), DETAIL_CHARS) or f"exit code {result.exit_code}"
    return TaskOutcome(status=TaskStatus.FAIL, container_runs=1, detail=detail, output=output)


def run_output(result: ExecutionResult, *, drop_suffix: str = "") -> str:
    """A run's stdout, then its stderr, as a report keeps them (the tail, ``OUTPUT_CHARS``)."""
    stdout = result.stdout
    if drop_suffix and stdout.endswith(drop_suffix):
        stdout = stdout[: -len(drop_suffix)]
    streams = (text for text in (stdout, result.stderr) if text)
    return _tail(
        "".join(text if text.endswith("\n") else f"{text}\n" for text in streams), OUTPUT_CHARS
    )


def _tail(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return "…" + text[len(text) - limit + 1 :]
