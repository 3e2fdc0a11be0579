"""How each language's program is started: one table, read by the host and by the supervisors."""


class LanguageRunner:
    """Where a program is written inside the container, which interpreter runs it, and how.

    A plain class: ``dataclasses`` would cost the supervisor's start its ``inspect`` import.
    """

    __slots__ = ("environment", "filename", "interpreter", "support_files", "waits_for_program")

    def __init__(
        self,
        filename: str,
        interpreter: tuple[str, ...],
        environment: tuple[tuple[str, str], ...] = (),
        support_files: tuple[tuple[str, str], ...] = (),
        waits_for_program: bool = False,
    ) -> None:
        self.filename = filename
        self.interpreter = interpreter
        self.environment = environment
        """Variables set for this language only (the container's environment is otherwise empty)."""
        self.support_files = support_files
        """Absolute path and text of files written (as the run uid) before the program starts."""
        self.waits_for_program = waits_for_program
        """The interpreter starts before its program exists and takes it on :data:`PROGRAM_FD`
        (see :data:`_WAIT_FOR_THE_PROGRAM`): its own start is then off the run's path."""


_PYTHON_SITE = "/tmp/.sandcrew-site"
_PYTHON_FILENAME = "main.py"

# The descriptors a waiting interpreter holds until its program comes (all closed then).
PROGRAM_FD = 3
"""Read end of the pipe on which the supervisor sends the program: a flag byte, then its text."""
STDOUT_FD = 4
"""The container's stdout, put back on 1 when the program comes."""
STDERR_FD = 5
"""The container's stderr, put back on 2 when the program comes."""
STARTUP_OUTPUT_FD = 6
"""Read end of the pipe that held 1 and 2 during the interpreter's start."""
WAITING_MARK = "SANDCREW_WAITING_FOR_THE_PROGRAM"
"""Set (to "1") in the environment of the interpreter that waits; it takes the variable out
of ``os.environ`` before the program runs, so no Python process the program starts waits
(its descriptor 3, if it has one, is the program's own). ``/proc/self/environ``, the
environment the process started with, still shows it."""
WITH_OUTPUT_FOLDER = b"o"
"""First byte of the program message: make the empty ``out`` folder (anything else: don't)."""
PROGRAM_NEVER_CAME_EXIT = 125
"""A waiting interpreter's status when its pipe closed without a program, or when it could
not take the program (the supervisor's own status for a program it could not start)."""

# Run by a Python program's interpreter during its start (it is the sitecustomize the
# environment points to), before the interpreter opens main.py: the supervisor starts the
# interpreter as soon as it may (in a pooled container, before the run), and this waits for
# the program there. Until then 1 and 2 are a pipe whose read end the supervisor keeps too,
# so that nothing the start prints (an image's .pth file, say) reaches the container's
# streams before the supervisor's acknowledgement; it is passed on to stderr once the
# program has come (by the supervisor, if the interpreter ended before). Whatever fails
# here ends the process with the reason on stderr: Python must not go on to a main.py
# that is not there.
_WAIT_FOR_THE_PROGRAM = f"""\
import os, sys


def _take_the_program():
    try:
        chunks = []
        while True:
            chunk = os.read({PROGRAM_FD}, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        if not chunks:  # the run went another way, or failed before its program was sent
            os._exit({PROGRAM_NEVER_CAME_EXIT})
        message = b"".join(chunks)
        os.dup2({STDOUT_FD}, 1)
        os.dup2({STDERR_FD}, 2)
        os.set_blocking({STARTUP_OUTPUT_FD}, False)
        while True:
            try:
                early = os.read({STARTUP_OUTPUT_FD}, 1 << 16)
            except BlockingIOError:
                break
            if not early:
                break
            while early:
                early = early[os.write(2, early) :]
        for descriptor in ({PROGRAM_FD}, {STDOUT_FD}, {STDERR_FD}, {STARTUP_OUTPUT_FD}):
            os.close(descriptor)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        handle = os.open({_PYTHON_FILENAME!r}, flags, 0o600)
        try:
            text = memoryview(message)[1:]
            while text:
                text = text[os.write(handle, text) :]
        finally:
            os.close(handle)
        if message[:1] == {WITH_OUTPUT_FOLDER!r}:
            os.mkdir("out", 0o700)
    except BaseException as error:
        try:
            os.write(2, ("sandcrew: cannot start the program: %s\\n" % (error,)).encode())
        finally:
            os._exit({PROGRAM_NEVER_CAME_EXIT})


if os.environ.pop({WAITING_MARK!r}, None) == "1":
    _take_the_program()
del _take_the_program
"""

# Saves the matplotlib figures a program shows or leaves open as PNGs in out/,
# so "plot it" works without a savefig. It runs before the interpreter's atexit
# callbacks (where pyplot destroys its figures), from threading's shutdown hook.
# Armed only when matplotlib.pyplot is first imported: what arming imports (threading,
# and warnings with the re of its filter) would cost every other program's start ~20 ms.
_SAVE_OPEN_FIGURES = """\
_out = os.path.join(os.getcwd(), "out")


def _save_open_figures():
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None or not os.path.isdir(_out):
        return
    for number in pyplot.get_fignums():
        path = os.path.join(_out, "figure-%d.png" % number)
        if not os.path.exists(path):
            try:
                pyplot.figure(number).savefig(path)
            except Exception as error:
                print("sandcrew: cannot save figure %d: %s" % (number, error), file=sys.stderr)


def _arm():
    import warnings

    warnings.filterwarnings("ignore", message=".*non-interactive.*")
    try:
        import threading

        threading._register_atexit(_save_open_figures)
    except (ImportError, AttributeError, RuntimeError):
        import atexit

        atexit.register(_save_open_figures)


class _WhenPyplotLoads:
    \"\"\"A finder that finds nothing: it arms the saving when pyplot is first imported.\"\"\"

    armed = False  # it stays on sys.meta_path: removing it while the import system walks
    # that list would make the walk skip the next finder

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "matplotlib.pyplot" and not cls.armed:
            cls.armed = True
            _arm()
        return None


sys.meta_path.insert(0, _WhenPyplotLoads)
"""


RUNNERS: dict[str, LanguageRunner] = {
    "python": LanguageRunner(
        filename=_PYTHON_FILENAME,
        interpreter=("python3",),
        environment=(
            ("PYTHONUNBUFFERED", "1"),
            ("PYTHONDONTWRITEBYTECODE", "1"),
            ("MPLBACKEND", "Agg"),
            ("PYTHONPATH", _PYTHON_SITE),
        ),
        support_files=(
            (
                f"{_PYTHON_SITE}/sitecustomize.py",
                _WAIT_FOR_THE_PROGRAM + "\n\n" + _SAVE_OPEN_FIGURES,
            ),
        ),
        waits_for_program=True,
    ),
    "bash": LanguageRunner(filename="main.sh", interpreter=("bash",)),
    "javascript": LanguageRunner(filename="main.js", interpreter=("node",)),
}
