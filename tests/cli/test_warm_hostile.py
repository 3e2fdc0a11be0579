"""`sandcrew warm` against hostile and unusual callers: each is served as its own process
would serve it, or declined (the command then runs in its own process), and the warm
process stays reachable and sound for the next command.

Every test starts a real warm process in a runtime folder of its own and talks to it with
the real console entry point or with the protocol's own client functions.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sandcrew.cli import _handover
from sandcrew.cli._warm_server import _exit_code
from sandcrew.sandbox._reaper import reap_orphans
from tests.cli.test_warm import (
    WAITS,
    WAITS_THEN_ENDS,
    Warm,
    process_state,
    run_client,
    socket_path_for,
    wait_for_line,
    waiting_run,
    warm_process,
)
from tests.sandbox.helpers import (
    process_alive,
    shared_client,
    wait_until_gone,
)

# This file's tests start real warm processes and containers.
pytestmark = pytest.mark.docker


@pytest.fixture
def warm() -> Iterator[Warm]:
    with warm_process() as started:
        yield started


def test_warm_start_never_imports_a_module_of_the_folder_it_was_started_in(
    warm: Warm, tmp_path: Path
) -> None:
    marker = tmp_path / "imported"
    checkout = tmp_path / "untrusted-checkout"
    checkout.mkdir()
    for library in ("typer", "rich", "pydantic", "docker"):
        (checkout / f"{library}.py").write_text(
            f"import pathlib\npathlib.Path({str(marker)!r}).write_text({library!r})\n"
        )
    # The console script, as a user types it (`python -m` puts the folder on the path of
    # the command itself).
    console_script = str(Path(sys.executable).with_name("sandcrew"))
    assert warm.sandcrew("warm", "stop").returncode == 0

    started = subprocess.run(
        [console_script, "warm", "start"],
        capture_output=True,
        text=True,
        cwd=checkout,
        env=warm.env,
        timeout=180,
        check=False,
    )

    assert started.returncode == 0, started.stderr
    assert warm.sandcrew("--version").stdout.strip() == "0.1.0"
    assert warm.served() == 1
    assert not marker.exists(), f"{marker.read_text()}.py of the folder was imported"


def test_a_ctrl_c_right_after_the_hand_over_stays_in_the_fork(warm: Warm) -> None:
    # Sent the moment the fork says it started: the fork must take it as the command's
    # Ctrl-C, never let it unwind into the warm process's own code (which removed the
    # socket, leaving a warm process nobody could reach).
    server = warm.pid()
    endings = []
    for _ in range(30):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as caller:
            caller.settimeout(30)
            caller.connect(socket_path_for(warm.env))  # fails once the socket is gone
            request = _handover.encode_request("run", ["--version"])
            streams = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("3i", 0, 1, 2))]
            caller.sendmsg([request], streams)
            started = _handover.read_frame(caller)
            assert started is not None
            assert started[0] == _handover.STARTED
            os.kill(int(started[1]), signal.SIGINT)
            caller.sendall(_handover.PROCEED)
            ended = _handover.read_frame(caller)
        assert ended is not None
        assert ended[0] == _handover.ENDED
        endings.append(ended[1])

    assert set(endings) == {"130"}
    assert warm.pid() == server
    assert Path(socket_path_for(warm.env)).is_socket()


def test_a_killed_command_ends_its_client_at_once_by_the_same_signal(warm: Warm) -> None:
    with waiting_run(warm) as first, waiting_run(warm, running=[first.command]) as second:
        # Of the warm process's connections, the second command's process holds its own
        # caller's only: not the first's, which must end when the first command ends.
        shared = sockets_of(warm.pid()) & sockets_of(second.command)
        assert len(shared) == 1, shared

        os.kill(first.command, signal.SIGKILL)

        # At once, not when the second command ends: it holds no copy of the connection.
        assert first.client.wait(timeout=30) == -signal.SIGKILL
        assert second.client.poll() is None


def sockets_of(process: int) -> set[str]:
    descriptors = Path(f"/proc/{process}/fd").iterdir()
    return {link for link in map(os.readlink, descriptors) if link.startswith("socket:")}


def test_a_caller_that_trickles_its_request_does_not_hold_the_warm_process(warm: Warm) -> None:
    stop = threading.Event()

    def trickle() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as caller:
            caller.connect(socket_path_for(warm.env))
            caller.sendall(struct.pack(">I", 1000))
            while not stop.wait(1.0):
                try:
                    caller.sendall(b"x")
                except OSError:
                    return

    trickler = threading.Thread(target=trickle)
    trickler.start()
    try:
        time.sleep(0.5)
        # The trickling caller is dropped after the request's time (5 s), whatever it
        # sends: the next caller is answered (a client waits 10 s before it gives up).
        assert warm.status().startswith("warm: pid ")
    finally:
        stop.set()
        trickler.join()


def test_a_large_environment_is_handed_over_whole(warm: Warm) -> None:
    large = {f"LARGE_{index}": "x" * 100_000 for index in range(3)}

    result = warm.sandcrew("--version", env={**warm.env, **large})

    assert (result.returncode, result.stdout.strip()) == (0, "0.1.0")
    assert warm.served() == 1


def test_a_path_to_another_descriptor_runs_the_command_in_its_own_process(
    warm: Warm, tmp_path: Path
) -> None:
    settings = tmp_path / "settings.toml"
    settings.write_text("[sandbox]\ntimeout = 3\n")
    with settings.open("rb") as opened:
        descriptor = opened.fileno()
        # As `--config <(...)` in a shell: the path of a descriptor only this process has.
        result = subprocess.run(
            [sys.executable, "-m", "sandcrew", "run", "--config", f"/dev/fd/{descriptor}", "-"],
            input="import time\ntime.sleep(30)\n",
            capture_output=True,
            text=True,
            env=warm.env,
            pass_fds=(descriptor,),
            timeout=180,
            check=False,
        )

    assert result.returncode == 124, result.stderr
    assert warm.served() == 0


def test_a_caller_with_other_groups_runs_in_its_own_process(warm: Warm) -> None:
    if os.getuid() != 0:
        pytest.fail("this test gives a caller other groups, which needs root (CI runs as root)")

    result = subprocess.run(
        [sys.executable, "-m", "sandcrew", "--version"],
        capture_output=True,
        text=True,
        env=warm.env,
        extra_groups=[4242],
        timeout=180,
        check=False,
    )

    assert (result.returncode, result.stdout.strip()) == (0, "0.1.0")
    # Its groups (the docker group, say) are not the warm process's: never lent to it.
    assert warm.served() == 0


def test_a_caller_with_other_interpreter_variables_runs_in_its_own_process(warm: Warm) -> None:
    result = warm.sandcrew("--version", env={**warm.env, "PYTHONHASHSEED": "123"})

    assert (result.returncode, result.stdout.strip()) == (0, "0.1.0")
    assert warm.served() == 0


def _lower_limits() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (123, 456))
    os.nice(5)


def test_the_command_gets_the_callers_resource_limits_and_priority(warm: Warm) -> None:
    with waiting_run(warm, preexec_fn=_lower_limits) as run:
        limits = Path(f"/proc/{run.command}/limits").read_text()
        priority = os.getpriority(os.PRIO_PROCESS, run.command)
        run.client.send_signal(signal.SIGINT)
        assert run.client.wait(timeout=90) == 130

    [open_files] = [line for line in limits.splitlines() if line.startswith("Max open files")]
    assert open_files.split()[3:5] == ["123", "456"]
    assert priority == os.getpriority(os.PRIO_PROCESS, 0) + 5


def test_exit_codes_of_system_exit_are_the_interpreters() -> None:
    assert _exit_code(SystemExit()) == 0
    assert _exit_code(SystemExit(None)) == 0
    assert _exit_code(SystemExit(3)) == 3
    assert _exit_code(SystemExit("a message")) == 1


# A shell's job control in miniature, on a terminal of its own: `sandcrew run` as a job in
# the background, or in the foreground then Ctrl-Z, `bg` and `fg`. It prints what it saw
# as JSON lines.
JOB_CONTROL = r"""
import fcntl, json, os, pty, select, signal, subprocess, sys, termios, time

scenario, warm_pid = sys.argv[1], int(sys.argv[2])
program = sys.argv[3]
primary, terminal = pty.openpty()
fcntl.ioctl(terminal, termios.TIOCSCTTY, 0)
signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # as a shell: it hands the terminal around
shell = os.getpgrp()
os.tcsetpgrp(terminal, shell)


def state(pid):
    with open(f"/proc/{pid}/stat") as status:
        return status.read().rsplit(")", 1)[1].split()[0]


def wait_for_state(pid, wanted, within=60):
    give_up = time.monotonic() + within
    while state(pid) != wanted and time.monotonic() < give_up:
        time.sleep(0.05)
    return state(pid)


def commands():
    with open(f"/proc/{warm_pid}/task/{warm_pid}/children") as children:
        return [int(pid) for pid in children.read().split()]


def read_all(seen=b""):
    while select.select([primary], [], [], 0.5)[0]:
        try:
            seen += os.read(primary, 65536)
        except OSError:
            break
    return seen


def say(**facts):
    print(json.dumps(facts), flush=True)


def foreground():
    os.setpgrp()
    os.tcsetpgrp(0, os.getpgrp())


sandcrew = [sys.executable, "-m", "sandcrew", "run"]


def start_in_the_foreground():
    job = subprocess.Popen(
        [*sandcrew, program], stdin=terminal, stdout=terminal, stderr=terminal,
        preexec_fn=foreground,
    )
    seen = b""
    while b"waiting" not in seen:
        seen += os.read(primary, 4096)
    return job, seen


if scenario == "background":
    job = subprocess.Popen(
        [*sandcrew, "-"], stdin=terminal, stdout=terminal, stderr=terminal, process_group=0
    )
    say(job=wait_for_state(job.pid, "T"), commands=commands())
    job.kill()
elif scenario == "kill":
    job, seen = start_in_the_foreground()
    os.killpg(job.pid, signal.SIGTSTP)  # Ctrl-Z
    stopped = wait_for_state(job.pid, "T")
    os.tcsetpgrp(terminal, shell)
    os.killpg(job.pid, signal.SIGTERM)  # kill %1: SIGTERM, then SIGCONT
    os.killpg(job.pid, signal.SIGCONT)
    code = job.wait(timeout=120)
    say(stopped=stopped, code=code, removed="removed" in read_all(seen).decode())
elif scenario == "bg":
    job, seen = start_in_the_foreground()
    [command] = commands()
    os.killpg(job.pid, signal.SIGTSTP)  # Ctrl-Z
    stopped = (wait_for_state(job.pid, "T"), wait_for_state(command, "T"))
    os.tcsetpgrp(terminal, shell)
    os.killpg(job.pid, signal.SIGCONT)  # bg
    time.sleep(3)  # past the program's own 2 seconds: had it gone on, it would have ended
    in_background = (wait_for_state(job.pid, "T"), wait_for_state(command, "T"))
    os.tcsetpgrp(terminal, job.pid)
    os.killpg(job.pid, signal.SIGCONT)  # fg
    code = job.wait(timeout=120)
    os.tcsetpgrp(terminal, shell)
    seen = read_all(seen)
    say(stopped=stopped, in_background=in_background, code=code, done=b"done" in seen)
"""


def job_control(
    warm: Warm,
    scenario: str,
    program: Path | None = None,
    environment: dict[str, str] | None = None,
) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-c", JOB_CONTROL, scenario, str(warm.pid()), str(program)],
        capture_output=True,
        text=True,
        env={**warm.env, **(environment or {})},
        start_new_session=True,  # a session of its own, whose terminal is the pty
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    facts: dict[str, object] = json.loads(result.stdout.splitlines()[-1])
    return facts


@pytest.mark.parametrize("served", [True, False], ids=["warm", "own-process"])
def test_kill_of_a_stopped_job_ends_it_as_its_own_process_would(
    warm: Warm, tmp_path: Path, served: bool
) -> None:
    program = tmp_path / "program.py"
    program.write_text(WAITS)
    environment = {} if served else {_handover.BYPASS_VARIABLE: "0"}

    facts = job_control(warm, "kill", program, environment)

    # `kill %1` of a job stopped with Ctrl-Z: the command is interrupted and its container
    # removed, as in a process of its own (it stayed stopped for ever, both of them).
    assert facts == {"stopped": "T", "code": 130, "removed": True}
    assert warm.served() == (1 if served else 0)


def test_a_background_job_reading_its_terminal_is_stopped_as_its_own_process_would_be(
    warm: Warm,
) -> None:
    facts = job_control(warm, "background")

    # Stopped by the kernel (SIGTTIN) as it reads the program from the terminal, in its
    # own process: a fork of the warm process is not under the terminal's job control and
    # would read what the user types for the shell.
    assert facts == {"job": "T", "commands": []}
    assert warm.served() == 0


def test_a_command_continued_in_the_background_stays_stopped_until_fg(
    warm: Warm, tmp_path: Path
) -> None:
    program = tmp_path / "program.py"
    program.write_text(WAITS_THEN_ENDS)

    facts = job_control(warm, "bg", program)

    assert facts["stopped"] == ["T", "T"]
    # `bg`: the client and its command stay stopped, as a job that reads its terminal in
    # the background is; `fg` goes on with both, and the program ends as it would have.
    assert facts["in_background"] == ["T", "T"]
    assert (facts["code"], facts["done"]) == (0, True)
    assert warm.served() == 1


def _drop_a_capability() -> None:
    # What `capsh --drop=...` or a container runtime does to a process: a bounding set
    # without CAP_DAC_READ_SEARCH (2).
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(24, 2, 0, 0, 0) == 0  # PR_CAPBSET_DROP


@pytest.mark.parametrize("confinement", ["capability", "mount-namespace"])
def test_a_confined_caller_runs_in_its_own_process(warm: Warm, confinement: str) -> None:
    if os.getuid() != 0:
        pytest.fail("this test confines a caller, which needs root (CI runs as root)")
    command = [sys.executable, "-m", "sandcrew", "--version"]
    if confinement == "mount-namespace":  # as bwrap or a flatpak gives a program
        command = ["unshare", "--mount", "--", *command]

    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=warm.env,
        preexec_fn=_drop_a_capability if confinement == "capability" else None,
        timeout=180,
        check=False,
    )

    assert (result.returncode, result.stdout.strip()) == (0, "0.1.0"), result.stderr
    # A fork would run outside the caller's confinement: never lent.
    assert warm.served() == 0


def test_a_signal_the_caller_ignores_is_ignored_by_its_command(warm: Warm) -> None:
    with waiting_run(warm, preexec_fn=_ignore(signal.SIGHUP)) as run:  # as nohup
        [mask] = [
            line.split()[1]
            for line in Path(f"/proc/{run.command}/status").read_text().splitlines()
            if line.startswith("SigIgn:")
        ]
        ignored = int(mask, 16)
        run.client.send_signal(signal.SIGHUP)
        time.sleep(1)
        still_running = run.client.poll() is None
        run.client.send_signal(signal.SIGINT)
        assert run.client.wait(timeout=90) == 130

    assert ignored & (1 << (signal.SIGHUP - 1))
    assert still_running


def test_the_warm_process_has_the_flags_of_the_interpreter_that_started_it() -> None:
    with warm_process() as started:
        # Started with -s, as a console script whose first line is `#!.../python -s`.
        assert started.sandcrew("warm", "stop").returncode == 0
        flagged = [sys.executable, "-s", "-m", "sandcrew"]
        again = subprocess.run(
            [*flagged, "warm", "start"], env=started.env, capture_output=True, text=True
        )
        assert again.returncode == 0, again.stderr
        with_flag = subprocess.run(
            [*flagged, "--version"], env=started.env, capture_output=True, text=True
        )
        assert started.served() == 1
        without = started.sandcrew("--version")
        warnings = subprocess.run(
            [sys.executable, "-s", "-W", "ignore", "-m", "sandcrew", "--version"],
            env=started.env,
            capture_output=True,
            text=True,
        )

        for result in (with_flag, without, warnings):
            assert result.stdout.strip() == "0.1.0"
        # Served: the caller with the same flags only.
        assert started.served() == 1


def test_a_command_outlives_the_warm_process_and_is_still_watched() -> None:
    with warm_process("--idle-minutes", "0.1") as started:
        # Longer than the default 10 s of a run.
        long_run = dataclasses.replace(
            started, env={**started.env, "SANDCREW_SANDBOX__TIMEOUT": "120"}
        )
        with waiting_run(long_run) as run:
            server = started.pid()
            time.sleep(8)  # past the 6 idle seconds: a running command is not idle
            assert started.pid() == server
            # Stopped: it no longer listens, and another may start at once, while it
            # still watches its command to the end.
            assert started.sandcrew("warm", "stop").returncode == 0
            assert "not warm" in started.status()
            assert process_alive(server)
            assert started.sandcrew("warm", "start").returncode == 0
            assert started.pid() != server
            os.kill(run.command, signal.SIGKILL)
            # Its caller hears how it ended, from the warm process that started it.
            assert run.client.wait(timeout=30) == -signal.SIGKILL
        assert wait_until_gone(server, within=30) == []


def test_a_caller_whose_go_ahead_comes_too_late_runs_the_command_with_its_own_ctrl_c(
    warm: Warm,
) -> None:
    server = warm.pid()
    os.kill(server, signal.SIGSTOP)  # the request waits for it
    try:
        with run_client(warm, WAITS) as client:
            time.sleep(1)
            # Stopped with its request sent, for longer than the fork waits for its
            # go-ahead: the fork ends, and the client runs the command itself.
            client.send_signal(signal.SIGSTOP)
            os.kill(server, signal.SIGCONT)
            time.sleep(17)
            client.send_signal(signal.SIGCONT)
            assert client.stdout is not None
            wait_for_line(client.stdout, b"waiting\n")
            client.send_signal(signal.SIGINT)
            assert client.wait(timeout=90) == 130
            assert client.stderr is not None
            assert b"Interrupted" in client.stderr.read()
    finally:
        os.kill(server, signal.SIGCONT)
    assert warm.served() == 1  # the fork that waited in vain


def _seccomp_filters(count: int) -> Callable[[], None]:
    """What a sandbox of the caller's own does: no new privileges, and ``count`` seccomp
    filters more (each allows every call: only their number shows)."""

    def install() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        allow_all = struct.pack("HBBI", 0x06, 0, 0, 0x7FFF0000)  # BPF_RET|BPF_K, ALLOW

        class Program(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        code = ctypes.create_string_buffer(allow_all)
        program = Program(1, ctypes.addressof(code))
        assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
        for _ in range(count):
            assert libc.prctl(22, 2, ctypes.byref(program), 0, 0) == 0  # seccomp, a filter

    return install


def test_a_caller_with_a_seccomp_filter_of_its_own_runs_in_its_own_process() -> None:
    # The warm process runs under one filter, as in a container with a seccomp profile.
    with warm_process(preexec_fn=_seccomp_filters(1)) as warm:
        alike = warm.sandcrew("--version", preexec_fn=_seccomp_filters(1))
        served_alike = warm.served()
        confined = warm.sandcrew("--version", preexec_fn=_seccomp_filters(2))

        for result in (alike, confined):
            assert (result.returncode, result.stdout.strip()) == (0, "0.1.0"), result.stderr
        # Same mode (filter) and no-new-privileges both: the number of filters tells them
        # apart, and a fork would run without the caller's own.
        assert (served_alike, warm.served()) == (1, 1)


def _ignore(*numbers: signal.Signals) -> Callable[[], None]:
    def ignore() -> None:
        for number in numbers:
            signal.signal(number, signal.SIG_IGN)

    return ignore


@pytest.mark.parametrize(
    "ignored",
    [(signal.SIGINT, signal.SIGQUIT), (signal.SIGINT, signal.SIGTERM)],
    ids=["a-scripts-background-job", "ctrl-c-and-sigterm"],
)
def test_a_caller_that_ignores_ctrl_c_and_is_killed_outright_ends_its_command(
    warm: Warm, ignored: tuple[signal.Signals, ...]
) -> None:
    # `command &` in a script starts it with SIGINT and SIGQUIT ignored. Its run's timeout
    # is longer than the waits below: only the caller's end can end it in time.
    patient = dataclasses.replace(warm, env={**warm.env, "SANDCREW_SANDBOX__TIMEOUT": "110"})
    with waiting_run(patient, preexec_fn=_ignore(*ignored)) as run:
        command = run.command
        run.client.kill()

    if signal.SIGTERM not in ignored:
        # Stopped as on Ctrl-C (SIGTERM, which the command line takes as one), and its
        # container removed with it.
        assert wait_until_gone(command, within=60) == []
        return
    # Nothing it takes as Ctrl-C: it ends at once, as its own process did when killed, and
    # its container is an orphan for the reaper (owner gone).
    deadline = time.monotonic() + 30
    while process_alive(command):
        assert time.monotonic() < deadline, "the command outlived its caller"
        time.sleep(0.1)
    # Judged by the containers being gone, not by what this reap returns: another test
    # worker's reaper may take the orphan first.
    reap_orphans(shared_client())
    assert wait_until_gone(command, within=60) == []


def test_callers_that_send_nothing_do_not_hold_the_warm_process(warm: Warm) -> None:
    silent = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(4)]
    try:
        for caller in silent:
            caller.connect(socket_path_for(warm.env))
        # Each would hold a warm process that read one request at a time for its 5 s: the
        # command behind them gave up after 10 s and ran in its own process.
        result = warm.sandcrew("--version")
        served = warm.served()
    finally:
        for caller in silent:
            caller.close()

    assert (result.returncode, result.stdout.strip()) == (0, "0.1.0"), result.stderr
    assert served == 1


def test_a_caller_that_ignores_ctrl_z_is_not_stopped_by_it(warm: Warm) -> None:
    states = []
    with waiting_run(warm, preexec_fn=_ignore(signal.SIGTSTP)) as run:
        # Ctrl-Z, then again after a SIGCONT (a debugger's, a supervisor's).
        for before in (None, signal.SIGCONT):
            if before is not None:
                run.client.send_signal(before)
                time.sleep(0.5)  # taken, before the next
            run.client.send_signal(signal.SIGTSTP)
            time.sleep(1)
            states += [process_state(run.client.pid), process_state(run.command)]
        run.client.send_signal(signal.SIGINT)
        assert run.client.wait(timeout=90) == 130

    # As its own process: SIGTSTP ignored, nothing stops.
    assert "T" not in states, states


@pytest.mark.parametrize("unbuffered", [True, False], ids=["python-u", "buffered"])
def test_a_callers_unbuffered_output_is_unbuffered_in_its_command(unbuffered: bool) -> None:
    report = (
        "import io, sys\n"
        "from sandcrew.cli import _handover, _warm_server\n"
        "form = _handover._stream_form(sys.stdout)\n"
        "fork = _warm_server._text_stream(1, form)\n"
        "print(isinstance(sys.stdout.buffer, io.RawIOBase),"
        " isinstance(fork.buffer, io.RawIOBase))\n"
    )
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    flags = ["-u"] if unbuffered else []

    done = subprocess.run(
        [sys.executable, *flags, "-c", report],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=True,
    )

    # Its own process's stdout and the fork's, from the stream's form in the request.
    assert done.stdout.split() == [str(unbuffered)] * 2


def test_a_command_holds_nothing_of_a_request_still_coming(warm: Warm) -> None:
    read_end, write_end = os.pipe()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as coming:
            coming.connect(socket_path_for(warm.env))
            streams = struct.pack("3i", read_end, write_end, write_end)
            coming.sendmsg(
                [struct.pack(">I", 1000) + b"x" * 10],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, streams)],
            )
            time.sleep(0.5)  # its first bytes and streams are in the warm process
            with waiting_run(warm) as run:
                folder = Path(f"/proc/{run.command}/fd")
                held = {os.readlink(folder / name) for name in os.listdir(folder)}
        pipe = f"pipe:[{os.fstat(write_end).st_ino}]"
    finally:
        os.close(read_end)
        os.close(write_end)

    # Another caller's stdout held by a long command would keep its reader from its end of
    # file (`sandcrew version | cat` hanging while another command runs).
    assert pipe not in held


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def test_a_request_still_coming_at_the_idle_time_is_waited_for_at_rest() -> None:
    with warm_process("--idle-minutes", "0.1") as warm:  # 6 seconds, from before this line
        started = time.monotonic()
        pid = warm.pid()  # `status` does not count as a command
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
            silent.settimeout(20)
            time.sleep(max(started + 3.5 - time.monotonic(), 0))
            # Its request is due within 5 s: declined ~1.3 s after the CPU is measured.
            silent.connect(socket_path_for(warm.env))
            time.sleep(max(started + 6.2 - time.monotonic(), 0))  # past the idle time
            before = _cpu_seconds(pid)
            time.sleep(1.0)
            used = _cpu_seconds(pid) - before
            reply = _handover.read_frame(silent)
        deadline = time.monotonic() + 20
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        ended = not process_alive(pid)

    # It waits on the request's deadline, not in a loop (a busy one took a whole CPU),
    # declines it when due, then ends as idle.
    assert used < 0.5, f"{used:.2f} s of CPU in 1 s of waiting"
    assert reply == (_handover.DECLINED, "not whole in time")
    assert ended


def test_a_request_with_more_descriptors_than_its_streams_is_declined_at_once(
    warm: Warm,
) -> None:
    read_end, write_end = os.pipe()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as caller:
            caller.settimeout(4)  # under the 5 s a request may take: declined, not dropped
            caller.connect(socket_path_for(warm.env))
            streams = struct.pack("3i", write_end, write_end, write_end)
            for _ in range(3):  # a byte at a time, each with three more descriptors
                try:
                    caller.sendmsg([b"\0"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, streams)])
                except BrokenPipeError:  # declined and hung up already; the reply is there
                    break
                time.sleep(0.2)  # each byte read apart: the warm process declines mid-request
            reply = _handover.read_frame(caller)
    finally:
        os.close(read_end)
        os.close(write_end)

    assert reply == (_handover.DECLINED, "more descriptors than the 3 streams")
    assert warm.status().startswith("warm: pid ")
