"""How each language's program is started: one table, read by the host and by the supervisors."""


class LanguageRunner:
    """Where a program is written inside the container, which interpreter runs it, and how.

    A plain class: ``dataclasses`` would cost the supervisor's start its ``inspect`` import.
    """

    __slots__ = ("environment", "filename", "interpreter", "support_files")

    def __init__(
        self,
        filename: str,
        interpreter: tuple[str, ...],
        environment: tuple[tuple[str, str], ...] = (),
        support_files: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.filename = filename
        self.interpreter = interpreter
        self.environment = environment
        """Variables set for this language only (the container's environment is otherwise empty)."""
        self.support_files = support_files
        """Absolute path and text of files written (as the run uid) before the program starts."""


_PYTHON_SITE = "/tmp/.sandcrew-site"

# Saves the matplotlib figures a program shows or leaves open as PNGs in out/,
# so "plot it" works without a savefig. It runs before the interpreter's atexit
# callbacks (where pyplot destroys its figures), from threading's shutdown hook.
# Armed only when matplotlib.pyplot is first imported: what arming imports (threading,
# and warnings with the re of its filter) would cost every other program's start ~20 ms.
_SAVE_OPEN_FIGURES = """\
import os, sys

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
        filename="main.py",
        interpreter=("python3",),
        environment=(
            ("PYTHONUNBUFFERED", "1"),
            ("PYTHONDONTWRITEBYTECODE", "1"),
            ("MPLBACKEND", "Agg"),
            ("PYTHONPATH", _PYTHON_SITE),
        ),
        support_files=((f"{_PYTHON_SITE}/sitecustomize.py", _SAVE_OPEN_FIGURES),),
    ),
    "bash": LanguageRunner(filename="main.sh", interpreter=("bash",)),
    "javascript": LanguageRunner(filename="main.js", interpreter=("node",)),
}
