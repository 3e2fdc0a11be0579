"""The crew's instructions: the seed example's rules, adapted to Python in a sandbox."""

from __future__ import annotations

from collections.abc import Mapping

from sandcrew.agents import COMPLETE_SIGNAL

_CODER_PROMPT = """You act as a Python coder: you write Python code to resolve the task. \
Once you finish writing code, ask runner to run the code for you.
Here're some rules to follow on writing Python code:
- put the code between ```python and ``` (use ```bash only when the task asks for shell commands)
- write exactly one code block per message
- write a top-level script: its statements run directly; do not hide the work in a main \
function that is never called
- {packages}
- always print the result to the console. Don't write code that doesn't print out anything.
- the code runs in a sandbox without network access, with a short time limit
If the reviewer comments on your code, fix it and send the whole code again.
If your code is incorrect, runner will tell you the error message. Fix the error and send \
the code again."""

_UNKNOWN_PACKAGES = (
    "use the Python standard library only; avoid external packages unless the task says otherwise"
)


def coder_prompt(packages: tuple[str, ...] | None = None) -> str:
    """The coder's instructions, naming the Python packages the sandbox has when that is known.

    ``packages``: what the image adds to the standard library (``()``: nothing);
    ``None`` when the image does not say.
    """
    if packages is None:
        rule = _UNKNOWN_PACKAGES
    elif not packages:
        rule = "use the Python standard library only: the sandbox has no other packages"
    else:
        rule = (
            "the sandbox has the Python standard library and these packages (with their "
            f"dependencies): {', '.join(packages)}; use them where they help, and no others"
        )
    return _CODER_PROMPT.format(packages=rule)


CODER_PROMPT = coder_prompt()
"""The coder's instructions when the image does not say which packages it has."""

REVIEWER_PROMPT = """You review the code block written by coder. Always answer by calling \
the review_code_block function, with one argument per check, judged from coder's last message."""

ADMIN_PROMPT = f"""You are the admin of a group of a coder, a reviewer and a runner. You give \
the task and decide when it is answered.
When the runner's result answers the task, reply with the final answer in one short \
sentence, then {COMPLETE_SIGNAL} on its own line.
When the result is wrong or does not answer the task, tell coder what to change, and do \
not write {COMPLETE_SIGNAL}."""

INTRODUCTIONS = {
    "coder": "I will write Python code to resolve the task",
    "reviewer": "I will review Python code",
    "runner": "I will run Python code once the review is done",
}
"""What each member says of itself when the chat starts (``send_introduction``)."""


_PREVIEW_FILE_BYTES = 64 * 1024
_PREVIEW_LINES = 5
_PREVIEW_LINE_CHARS = 200


def describe_run_files(files: Mapping[str, bytes], *, output_files: bool) -> str:
    """What the task adds about files: the inputs (size, first lines of small text) and out/."""
    if not files and not output_files:
        return ""
    lines = [""]
    if files:
        lines.append("Files in the program's working directory (read-only):")
        for name, data in files.items():
            lines.append(f"- {name} ({len(data)} bytes)")
            lines += [f"    {line}" for line in _first_lines(data)]
    lines.append(
        "Files the program writes into the folder out/ (it exists) are returned to the user; "
        "save plots and tables there."
    )
    return "\n".join(lines)


def _first_lines(data: bytes) -> list[str]:
    if len(data) > _PREVIEW_FILE_BYTES:
        return []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return []
    if "\x00" in text:
        return []
    return [line[:_PREVIEW_LINE_CHARS] for line in text.splitlines()[:_PREVIEW_LINES]]
