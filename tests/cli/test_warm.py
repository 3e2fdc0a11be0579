"""`sandcrew warm`: a command handed to the warm process behaves as if it ran in its own.

Each test starts a real warm process in a runtime folder of its own (``XDG_RUNTIME_DIR``),
so that no other test's command is served by it, and runs the real console entry point
against it: the streams, folder, environment, umask and signals of the client reach the
command, and the containers go when the client stops or dies.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sandcrew.cli import _handover
from sandcrew.sandbox._labels import process_status
from tests.cli.test_import_graph import LIST_MODULES_AT_EXIT, offenders
from tests.cli.test_terminal import HOSTILE_OUTPUT, assert_nothing_obeyed, plain
from tests.process import cli_on_terminal, run_cli_in_terminal
from tests.sandbox.helpers import our_containers, shared_client, wait_until_gone

WAITS = "import time\nprint('waiting', flush=True)\ntime.sleep(120)\n"
WAITS_THEN_ENDS = "import time\nprint('waiting', flush=True)\ntime.sleep(2)\nprint('done')\n"


@dataclass(frozen=True)
class Warm:
    """A warm process of this installation and the environment that reaches it."""

    env: dict[str, str]
    folder: Path

    def sandcrew(
        self,
        *args: str,
        stdin: str = "",
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        umask: int = -1,
        preexec_fn: Callable[[], None] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sandcrew", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env if env is None else env,
            cwd=cwd,
            umask=umask,
            preexec_fn=preexec_fn,
            timeout=180,
            check=False,
        )

    def status(self) -> str:
        return self.sandcrew("warm", "status").stdout

    def pid(self) -> int:
        found = re.search(r"pid (\d+)", self.status())
        assert found, "not warm"
        return int(found.group(1))

    def served(self) -> int:
        found = re.search(r"(\d+) commands served", self.status())
        assert found, "not warm"
        return int(found.group(1))

    def commands(self) -> list[int]:
        """The pids of the commands the warm process is running now."""
        pid = self.pid()
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return [int(child) for child in children]


def socket_path_for(env: dict[str, str]) -> str:
    """The warm process's socket for a caller with ``env``'s runtime folder."""
    saved = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = env["XDG_RUNTIME_DIR"]
    try:
        return _handover.socket_path()
    finally:
        if saved is None:
            del os.environ["XDG_RUNTIME_DIR"]
        else:
            os.environ["XDG_RUNTIME_DIR"] = saved


def private_runtime_folder() -> Path:
    # Short: a Unix socket's path has at most 107 bytes.
    return Path(tempfile.mkdtemp(prefix="scw", dir="/tmp"))


@contextlib.contextmanager
def warm_process(*options: str, preexec_fn: Callable[[], None] | None = None) -> Iterator[Warm]:
    """A warm process of its own; ``preexec_fn`` runs in ``warm start``'s process before
    its program (what it sets, the warm process inherits)."""
    base = private_runtime_folder()
    # The test run's own environment says SANDCREW_WARM=0 (tests/conftest.py).
    env = {**os.environ, "XDG_RUNTIME_DIR": str(base), _handover.BYPASS_VARIABLE: "1"}
    warm = Warm(env=env, folder=base / "sandcrew")
    started = warm.sandcrew("warm", "start", *options, preexec_fn=preexec_fn)
    assert started.returncode == 0, started.stderr
    assert started.stdout.startswith("warm: pid "), started.stdout
    try:
        yield warm
    finally:
        pid = warm.pid() if "pid" in warm.status() else None
        warm.sandcrew("warm", "stop")
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def warm() -> Iterator[Warm]:
    with warm_process() as started:
        yield started


def wait_for_line(stream: object, wanted: bytes) -> bytes:
    seen = b""
    while not seen.endswith(wanted):
        piece = stream.read1(65536)  # type: ignore[attr-defined]
        assert piece, f"the output ended before {wanted!r}: {seen!r}"
        seen += piece
    return seen


@dataclass
class WaitingRun:
    """A `sandcrew run -` client whose program has printed ``waiting``, and the pid of the
    fork of the warm process that runs it."""

    client: subprocess.Popen[bytes]
    command: int

    def rest(self) -> bytes:
        assert self.client.stdout is not None
        return self.client.stdout.read()

    def stderr(self) -> bytes:
        assert self.client.stderr is not None
        return self.client.stderr.read()


def run_client(
    warm: Warm, program: str, *, preexec_fn: Callable[[], None] | None = None
) -> subprocess.Popen[bytes]:
    """`sandcrew run -` of ``program`` (given on its stdin, which is then closed)."""
    client = subprocess.Popen(
        [sys.executable, "-m", "sandcrew", "run", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=warm.env,
        # A process group of its own, as a shell gives a job: in an orphaned group (the
        # test run's may be one) the kernel drops a SIGTSTP instead of stopping anyone.
        process_group=0,
        preexec_fn=preexec_fn,
    )
    assert client.stdin is not None
    client.stdin.write(program.encode())
    client.stdin.close()
    return client


@contextlib.contextmanager
def waiting_run(
    warm: Warm,
    program: str = WAITS,
    *,
    preexec_fn: Callable[[], None] | None = None,
    running: Iterable[int] = (),
) -> Iterator[WaitingRun]:
    """A client whose program has printed ``waiting``; ``running``: the commands the warm
    process ran before it (still running)."""
    with run_client(warm, program, preexec_fn=preexec_fn) as client:
        assert client.stdout is not None
        wait_for_line(client.stdout, b"waiting\n")
        [command] = set(warm.commands()) - set(running)
        try:
            yield WaitingRun(client, command)
        finally:
            if client.poll() is None:
                client.send_signal(signal.SIGCONT)
                client.kill()


@pytest.mark.docker
def test_a_handed_over_run_prints_and_ends_as_a_run_of_its_own(warm: Warm) -> None:
    program = "import sys\nprint(6 * 7)\nprint('to stderr', file=sys.stderr)\nsys.exit(3)\n"

    served = warm.sandcrew("run", "-", stdin=program)
    alone = warm.sandcrew("run", "-", stdin=program, env={**warm.env, "SANDCREW_WARM": "0"})

    assert warm.served() == 1
    assert (served.returncode, served.stdout) == (alone.returncode, alone.stdout) == (3, "42\n")
    for result in (served, alone):
        assert result.stderr.startswith("to stderr\n")
        assert "exit 3" in result.stderr


@pytest.mark.docker
def test_the_command_gets_the_clients_folder_environment_and_umask(warm: Warm) -> None:
    folder = Path(tempfile.mkdtemp(dir=warm.folder.parent))
    (folder / "program.py").write_text(
        "import os, time\nos.makedirs('out', exist_ok=True)\n"
        "open('out/note.txt', 'w').write('saved')\ntime.sleep(30)\n"
    )
    env = {**warm.env, "SANDCREW_SANDBOX__TIMEOUT": "3"}

    result = warm.sandcrew("run", "program.py", "--out", "kept", cwd=folder, env=env, umask=0o077)

    assert warm.served() == 1
    # The relative path, the timeout from the environment, --out in the client's folder.
    assert result.returncode == 124, result.stderr
    assert (folder / "kept" / "note.txt").read_text() == "saved"
    # The folder made for --out has the client's umask, not the warm process's.
    assert stat.S_IMODE((folder / "kept").stat().st_mode) == 0o700


@pytest.mark.docker
def test_hostile_output_on_the_clients_terminal_is_shown_not_obeyed(warm: Warm) -> None:
    source = warm.folder.parent / "hostile.py"
    source.write_text(f"import sys\nsys.stdout.write({HOSTILE_OUTPUT!r})\n")

    code, screen = run_cli_in_terminal("run", str(source), env=warm.env)

    assert warm.served() == 1
    assert code == 0
    assert_nothing_obeyed(screen)
    assert "exit 0" in plain(screen)


@pytest.mark.docker
def test_the_repl_runs_on_the_clients_terminal_and_its_ctrl_c_interrupts_a_cell(
    warm: Warm,
) -> None:
    with cli_on_terminal("repl", with_stdin=True, env=warm.env) as terminal:
        terminal.read_until(b"In [1]: ", within=240)
        [command] = warm.commands()
        terminal.send(b"x = 6 * 7\r")
        terminal.read_until(b"In [2]: ")
        terminal.send(b"import time\r")
        terminal.read_until(b"In [3]: ")
        terminal.send(b"while True:\r    print('looping', flush=True); time.sleep(0.2)\r\r")
        terminal.read_until(b"\nlooping")
        # Typed on the terminal: the kernel signals the client, which passes it on.
        terminal.send(b"\x03")
        interrupted = terminal.read_until(b"In [4]: ", within=60)
        terminal.send(b"x\r")
        value = terminal.read_until(b"In [5]: ")
        terminal.send(b"\x04")
        assert terminal.finish() == 0

    assert warm.served() == 1
    assert b"KeyboardInterrupt" in interrupted
    assert b"Out[4]: 42" in value
    assert wait_until_gone(command, within=60) == []


@pytest.mark.docker
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_of_the_client_stops_the_command_and_removes_its_container(
    warm: Warm, stop: signal.Signals
) -> None:
    with waiting_run(warm) as run:
        command = run.command
        assert our_containers(shared_client(), owner_pid=command)
        run.client.send_signal(stop)
        stderr = run.stderr()
        returncode = run.client.wait(timeout=60)

    assert returncode == 130, stderr
    assert b"Interrupted" in stderr
    # The command removed its container before it ended, as in a process of its own.
    assert not our_containers(shared_client(), owner_pid=command)


def process_state(pid: int) -> str:
    """The state letter of ``pid`` (``T`` stopped, ``S`` sleeping, ``R`` running), or
    ``gone``."""
    status = process_status(pid)
    return "gone" if status is None else status[0]


def wait_for_state(pid: int, wanted: set[str]) -> None:
    deadline = time.monotonic() + 30
    while process_state(pid) not in wanted:
        assert time.monotonic() < deadline, f"{pid} stayed {process_state(pid)}"
        time.sleep(0.05)


@pytest.mark.docker
def test_ctrl_z_stops_the_command_with_its_client_and_fg_continues_both(warm: Warm) -> None:
    with waiting_run(warm, WAITS_THEN_ENDS) as run:
        try:
            run.client.send_signal(signal.SIGTSTP)
            wait_for_state(run.client.pid, {"T"})
            # Stopped with its client: the program's 2 s go by without it ending.
            wait_for_state(run.command, {"T"})
            time.sleep(3)
            assert process_state(run.command) == "T"
        finally:
            run.client.send_signal(signal.SIGCONT)
        wait_for_state(run.command, {"S", "R", "gone"})
        rest = run.rest()
        assert run.client.wait(timeout=60) == 0

    assert rest == b"done\n"


@pytest.mark.docker
def test_a_command_stopped_with_its_client_ends_when_the_client_is_killed(warm: Warm) -> None:
    with waiting_run(warm) as run:
        command = run.command
        run.client.send_signal(signal.SIGTSTP)
        wait_for_state(command, {"T"})
        run.client.kill()

    # Not stopped for ever: continued, it finds its caller gone and stops as on Ctrl-C.
    assert wait_until_gone(command, within=60) == []


@pytest.mark.docker
def test_a_client_killed_outright_stops_its_command_and_its_container_goes(warm: Warm) -> None:
    with waiting_run(warm) as run:
        command = run.command
        run.client.kill()

    # The command ends, and its container with it.
    assert wait_until_gone(command, within=60) == []


def test_a_handed_over_command_imports_none_of_the_command_lines_libraries(
    warm: Warm, tmp_path: Path
) -> None:
    report = tmp_path / "modules.txt"

    done = subprocess.run(
        [sys.executable, "-c", LIST_MODULES_AT_EXIT, str(report), "run", "-"],
        input="print(6 * 7)\n",
        capture_output=True,
        text=True,
        env=warm.env,
        check=False,
    )

    assert (done.returncode, done.stdout) == (0, "42\n"), done.stderr
    assert warm.served() == 1
    imported = set(report.read_text().splitlines())
    assert "sandcrew.cli._handover" in imported
    heavy = ("typer", "click", "pydantic", "pydantic_settings", "docker", "rich", "asyncio")
    assert offenders(imported, heavy) == []


def test_a_long_command_does_not_keep_the_next_warm_process_from_starting() -> None:
    with warm_process() as warm, waiting_run(warm) as run:
        stopped = warm.sandcrew("warm", "stop")
        assert stopped.stdout.startswith("stopped: "), stopped.stdout
        # The command goes on; a new warm process starts beside it.
        assert run.client.poll() is None
        again = warm.sandcrew("warm", "start")
        assert again.returncode == 0, again.stderr
        assert again.stdout.startswith("warm: pid "), again.stdout
        run.client.send_signal(signal.SIGINT)
        assert run.client.wait(timeout=60) == 130


def test_usage_errors_and_the_version_come_back_with_their_codes(warm: Warm) -> None:
    version = warm.sandcrew("--version")
    unknown = warm.sandcrew("run", "-", "--no-such-option")
    unknown_alone = warm.sandcrew(
        "run", "-", "--no-such-option", env={**warm.env, "SANDCREW_WARM": "0"}
    )
    # A command whose stdin is closed runs in the client's own process, which says so.
    closed_stdin = subprocess.run(
        ["sh", "-c", 'exec "$0" -m sandcrew run - <&-', sys.executable],
        capture_output=True,
        text=True,
        env=warm.env,
        check=False,
    )

    assert version.returncode == 0
    assert version.stdout.strip() == "0.1.0"
    assert (unknown.returncode, unknown.stderr) == (unknown_alone.returncode, unknown_alone.stderr)
    assert unknown.returncode == 125
    assert "No such option: --no-such-option" in unknown.stderr
    assert closed_stdin.returncode == 125
    assert "stdin is closed" in closed_stdin.stderr
    assert warm.served() == 2


@pytest.mark.parametrize(
    "request_bytes",
    [b"\x00\x00\x00\x05hello", b"\xff\xff\xff\xff", b"\x00\x00\x00\x02\x00\x00", b"\x00"],
    ids=["not-the-protocol", "over-the-limit", "empty-fields", "too-short"],
)
def test_a_malformed_request_is_declined_and_the_next_command_is_served(
    warm: Warm, request_bytes: bytes
) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as caller:
        caller.settimeout(30)
        caller.connect(socket_path_for(warm.env))
        caller.sendall(request_bytes)
        reply = _handover.read_frame(caller)

    assert reply is not None
    assert reply[0] == _handover.DECLINED
    assert warm.sandcrew("--version").stdout.strip() == "0.1.0"
    assert warm.served() == 1


def test_a_runtime_folder_open_to_others_is_not_trusted(tmp_path: Path) -> None:
    base = private_runtime_folder()
    try:
        env = {**os.environ, "XDG_RUNTIME_DIR": str(base), _handover.BYPASS_VARIABLE: "1"}
        folder = base / "sandcrew"
        folder.mkdir(mode=0o755)
        folder.chmod(0o755)
        path = socket_path_for(env)
        planted = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        planted.bind(path)
        planted.listen(1)
        planted.settimeout(0.5)

        result = subprocess.run(
            [sys.executable, "-m", "sandcrew", "--version"],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )

        assert result.returncode == 0
        assert result.stdout.strip() == "0.1.0"
        # The planted socket never saw the command, its environment or its streams.
        with pytest.raises(TimeoutError):
            planted.accept()
        planted.close()
        refused = subprocess.run(
            [sys.executable, "-m", "sandcrew", "warm", "start"],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert refused.returncode != 0
        assert "closed to others" in refused.stderr
    finally:
        shutil.rmtree(base, ignore_errors=True)


PLANTED_BY_ANOTHER_USER = """
import os, socket, sys
planted = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
planted.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
os.setgid(65534)
os.setuid(65534)
planted.listen(1)  # the uid SO_PEERCRED reports is the listener's at this call
print("listening", flush=True)
planted.settimeout(60)
connection, _ = planted.accept()
received = b""
while chunk := connection.recv(65536):
    received += chunk
print(f"received {len(received)} bytes", flush=True)
"""


def test_a_socket_served_by_another_user_is_not_trusted() -> None:
    if os.getuid() != 0:
        pytest.fail("this test plays another user, which needs root (CI runs as root)")
    base = private_runtime_folder()
    env = {**os.environ, "XDG_RUNTIME_DIR": str(base), _handover.BYPASS_VARIABLE: "1"}
    (base / "sandcrew").mkdir(mode=0o700)
    try:
        with subprocess.Popen(
            [sys.executable, "-c", PLANTED_BY_ANOTHER_USER, socket_path_for(env)],
            stdout=subprocess.PIPE,
            text=True,
        ) as planted:
            assert planted.stdout is not None
            assert planted.stdout.readline() == "listening\n"
            result = subprocess.run(
                [sys.executable, "-m", "sandcrew", "--version"],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
                check=False,
            )
            said = planted.stdout.read()
        assert result.returncode == 0
        assert result.stdout.strip() == "0.1.0"
        # The client connected, saw the listener's uid, sent nothing and ran the command itself.
        assert said == "received 0 bytes\n"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_warm_process_ends_after_its_idle_time_and_leaves_no_socket() -> None:
    with warm_process("--idle-minutes", "0.1") as warm:
        path = Path(socket_path_for(warm.env))
        assert path.exists()
        deadline = time.monotonic() + 60
        while "not warm" not in warm.status() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert "not warm" in warm.status()
        assert not path.exists()
        log = next(warm.folder.glob("*.log")).read_text()
        assert "ending: no command for 0.1 minutes" in log
        # Commands go on in their own processes.
        assert warm.sandcrew("--version").stdout.strip() == "0.1.0"


def test_a_warm_process_killed_outright_leaves_commands_working_and_can_start_again() -> None:
    with warm_process() as warm:
        os.kill(warm.pid(), signal.SIGKILL)
        time.sleep(0.2)
        assert warm.sandcrew("--version").stdout.strip() == "0.1.0"
        assert "not warm" in warm.status()
        again = warm.sandcrew("warm", "start")
        assert again.returncode == 0, again.stderr
        assert warm.sandcrew("--version").stdout.strip() == "0.1.0"
        assert warm.served() == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "module",
    # Imported when it starts, and one that only a command's run imports (a fork would
    # import the new file on top of the old code).
    ["sandcrew.cli.version", "sandcrew._http_serving"],
)
def test_a_change_to_sandcrews_code_ends_the_warm_process_and_runs_the_new_code(
    module: str,
) -> None:
    # Slow (run one at a time): every warm process of the installation watches this file.
    spec = importlib.util.find_spec(module)
    assert spec is not None
    assert spec.origin is not None
    watched = Path(spec.origin)
    before = watched.stat()
    with warm_process() as warm:
        try:
            os.utime(watched, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
            result = warm.sandcrew("version")
        finally:
            os.utime(watched, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert result.returncode == 0
        assert result.stdout.strip() == "0.1.0"
        assert "not warm" in warm.status()
        log = next(warm.folder.glob("*.log")).read_text()
        assert f"ending: {watched} changed since the start" in log


@pytest.mark.slow
def test_warm_start_replaces_a_warm_process_whose_code_changed() -> None:
    import sandcrew.cli.version as watched_module

    watched = Path(watched_module.__file__)
    before = watched.stat()
    with warm_process() as warm:
        old = warm.pid()
        os.utime(watched, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        try:
            again = warm.sandcrew("warm", "start")
            assert again.returncode == 0, again.stderr
            assert again.stdout.startswith("warm: pid "), again.stdout
            assert warm.pid() != old
            assert warm.sandcrew("--version").stdout.strip() == "0.1.0"
            assert warm.served() == 1
        finally:
            os.utime(watched, ns=(before.st_atime_ns, before.st_mtime_ns))
