"""Hostile programs, each contained; every test also proves no container is left behind."""

from __future__ import annotations

import os
import time
import tracemalloc

import docker
import pytest

from sandcrew.sandbox import DockerSandbox, SandboxConfig

pytestmark = pytest.mark.docker

DEADLINE_SLACK = 2.0


async def test_fork_bomb_hits_the_pids_limit(sandbox: DockerSandbox) -> None:
    code = """
import errno, os, time
children = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        children += 1
except OSError as exc:
    print("fork refused", errno.errorcode[exc.errno], children)
# cgroup v1 keeps the pids controller in its own folder, v2 in one hierarchy.
for events in ('/sys/fs/cgroup/pids/pids.events', '/sys/fs/cgroup/pids.events'):
    if os.path.exists(events):
        print(open(events).read().strip())
        break
"""
    result = await sandbox.run(code)
    assert result.exit_code == 0, result
    word, refused, code_name, count, event, refusals = result.stdout.split()
    assert (word, refused, code_name) == ("fork", "refused", "EAGAIN")
    assert int(count) < sandbox.config.pids_limit
    assert event == "max"
    assert int(refusals) >= 1
    # The main process exited, so its sleeping children died with the container.
    assert result.duration < 10


async def test_shell_fork_bomb_ends(sandbox: DockerSandbox) -> None:
    started = time.monotonic()
    result = await sandbox.run("bomb() { bomb | bomb & }; bomb\nsleep 1\necho survived", "bash")
    # Either the shell got its last fork before the deadline or the deadline
    # ended it: the run ends in time either way.
    assert time.monotonic() - started < sandbox.config.timeout + DEADLINE_SLACK
    assert "fork: retry: Resource temporarily unavailable" in result.stderr
    assert result.stdout in ("survived\n", "")
    assert result.timed_out == (result.stdout == "")


async def test_memory_bomb_is_killed_for_memory(sandbox: DockerSandbox) -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))\n"
    result = await sandbox.run(code)
    assert result.oom_killed, result
    assert result.exit_code == 137
    assert not result.timed_out
    assert result.to_runner_message().splitlines()[1] == "killed: out of memory (limit 256 MiB)"


async def test_a_program_killed_by_a_signal_keeps_its_own_stderr(sandbox: DockerSandbox) -> None:
    code = (
        "import os, signal, sys\n"
        "print('bye', file=sys.stderr, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    result = await sandbox.run(code)
    assert result.exit_code == 137
    assert result.stderr == "bye\n"  # nothing from the supervisor
    assert not result.oom_killed
    assert not result.timed_out


async def test_a_program_that_survives_its_childs_memory_kill_is_not_blamed(
    sandbox: DockerSandbox,
) -> None:
    child = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))"
    code = (
        "import subprocess, sys\n"
        f"child = subprocess.run([sys.executable, '-c', {child!r}])\n"
        "print('child', child.returncode)\n"
        "sys.exit(1)\n"
    )
    result = await sandbox.run(code)
    assert result.stdout == "child -9\n", result
    assert result.exit_code == 1
    assert not result.oom_killed
    assert not result.timed_out


async def test_infinite_loop_times_out(sandbox: DockerSandbox) -> None:
    started = time.monotonic()
    result = await sandbox.run("print('spinning', flush=True)\nwhile True:\n    pass\n")
    elapsed = time.monotonic() - started
    assert result.timed_out
    assert result.exit_code == 124
    assert result.stdout == "spinning\n"
    assert sandbox.config.timeout <= result.duration < sandbox.config.timeout + DEADLINE_SLACK
    assert elapsed < sandbox.config.timeout + DEADLINE_SLACK
    assert result.to_runner_message().splitlines()[1] == "timed out after 3s"


async def test_silent_sleeper_ignoring_sigterm_is_killed_at_the_deadline(
    sandbox: DockerSandbox,
) -> None:
    code = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)\n"
    started = time.monotonic()
    result = await sandbox.run(code)
    assert result.timed_out
    assert time.monotonic() - started < sandbox.config.timeout + DEADLINE_SLACK


async def test_output_flood_is_capped_and_host_memory_stays_bounded(
    docker_client: docker.DockerClient,
) -> None:
    cap = 256 * 1024
    config = SandboxConfig(timeout=3.0, max_output_bytes=cap)
    code = (
        "import sys\nline = 'x' * 65535 + '\\n'\n"
        "while True:\n    sys.stdout.write(line)\n    sys.stderr.write(line)\n"
    )
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        tracemalloc.start()
        try:
            result = await sandbox.run(code)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert result.timed_out
    assert result.stdout_truncated
    assert result.stderr_truncated
    assert len(result.stdout.encode()) == cap
    assert len(result.stderr.encode()) == cap
    # Hundreds of MiB went through; the host kept a few times the caps at most.
    assert peak < 8 * cap, peak


async def test_finite_flood_is_truncated_and_the_program_ends_normally(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(timeout=5.0, max_output_bytes=1024)
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        result = await sandbox.run("print('y' * 10_000_000)\nprint('done')")
    assert result.exit_code == 0
    assert result.stdout == "y" * 1024
    assert result.stdout_truncated
    assert not result.stderr_truncated


async def test_invalid_utf8_becomes_replacement_characters(sandbox: DockerSandbox) -> None:
    code = (
        "import sys\n"
        "sys.stdout.buffer.write(b'ok \\xff\\xfe end')\n"
        "sys.stderr.buffer.write(b'\\xc3')\n"
    )
    result = await sandbox.run(code)
    assert result.ok
    assert result.stdout == "ok \ufffd\ufffd end"
    assert result.stderr == "\ufffd"


async def test_background_child_does_not_outlive_the_program(sandbox: DockerSandbox) -> None:
    code = "import subprocess\nsubprocess.Popen(['sleep', '100'])\nprint('main done')\n"
    started = time.monotonic()
    result = await sandbox.run(code, timeout=20)
    assert result.ok
    assert result.stdout == "main done\n"
    assert time.monotonic() - started < 5


async def test_network_connections_fail(sandbox: DockerSandbox) -> None:
    code = """
import os, socket
print(sorted(os.listdir('/sys/class/net')))
for host, port in [('1.1.1.1', 53), ('172.17.0.1', 2375), ('8.8.8.8', 443)]:
    try:
        socket.create_connection((host, port), timeout=1).close()
        print('connected', host)
    except OSError as exc:
        print('refused', host, type(exc).__name__)
try:
    socket.getaddrinfo('example.com', 80)
    print('resolved')
except OSError:
    print('no dns')
print(os.readlink('/proc/self/ns/net'))
"""
    result = await sandbox.run(code)
    assert result.ok, result
    lines = result.stdout.splitlines()
    assert lines[0] == "['lo']"
    assert all(line.startswith("refused ") for line in lines[1:4]), lines
    assert lines[4] == "no dns"
    assert lines[5] != os.readlink("/proc/self/ns/net")


async def test_host_environment_does_not_leak(
    sandbox: DockerSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANDBOX_LEAK_MARKER", "host-secret-4711")
    result = await sandbox.run("import os\nprint(sorted(os.environ.items()))")
    assert result.ok
    assert "SANDBOX_LEAK_MARKER" not in result.stdout
    assert "host-secret-4711" not in result.stdout
    variables = dict(eval(result.stdout))
    assert set(variables) <= {
        "HOME",
        "HOSTNAME",
        "LANG",
        "MPLBACKEND",  # matplotlib draws without a display
        "PATH",
        "PYTHONPATH",  # the sandbox's sitecustomize: it hands the program over, saves open figures
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "PWD",  # exported by the shell that starts the program
    }, variables


async def test_root_filesystem_is_read_only(sandbox: DockerSandbox) -> None:
    code = """
import errno
# /var/tmp is world-writable in the image: only a read-only mount stops this.
for path in ['/evil', '/etc/evil', '/usr/bin/evil', '/var/tmp/evil']:
    try:
        open(path, 'a').close()
        print('wrote', path)
    except OSError as exc:
        print(errno.errorcode[exc.errno], path)
root = [line.split() for line in open('/proc/self/mounts') if line.split()[1] == '/']
print(root[-1][3].split(',')[0])
"""
    result = await sandbox.run(code)
    assert result.ok, result
    assert result.stdout.splitlines() == [
        "EROFS /evil",
        "EROFS /etc/evil",
        "EROFS /usr/bin/evil",
        "EROFS /var/tmp/evil",
        "ro",
    ]


async def test_filling_tmp_stops_at_the_tmpfs_size(sandbox: DockerSandbox) -> None:
    # Files of 8 MiB each (under the file-size ulimit) until the tmpfs is full.
    code = """
import errno, os
written = 0
chunk = b'x' * (1024 * 1024)
try:
    for index in range(1000):
        with open(f'/tmp/fill{index}', 'wb') as handle:
            for _ in range(8):
                handle.write(chunk)
                handle.flush()
                written += len(chunk)
except OSError as exc:
    print(errno.errorcode[exc.errno], written // (1024 * 1024))
"""
    result = await sandbox.run(code)
    assert result.ok, result
    error, mebibytes = result.stdout.split()
    assert error == "ENOSPC"
    assert 60 <= int(mebibytes) <= 64


async def test_identity_capabilities_and_seccomp(sandbox: DockerSandbox) -> None:
    result = await sandbox.run("cat /proc/self/status", "bash")
    status = dict(line.split(":", 1) for line in result.stdout.splitlines() if ":" in line)
    uid = status["Uid"].split()[0]
    assert 20000 <= int(uid) <= 59999
    assert status["Uid"].split() == [uid] * 4
    assert status["Gid"].split() == [uid] * 4
    assert status["Groups"].strip() == ""
    for capability_set in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert status[capability_set].strip() == "0000000000000000", capability_set
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Seccomp"].strip() == "2"


async def test_privilege_tricks_are_denied(sandbox: DockerSandbox) -> None:
    code = """
unshare -r true; echo "unshare $?"
mount -t tmpfs none /tmp 2>/dev/null; echo "mount $?"
(echo b > /proc/sysrq-trigger) 2>/dev/null; echo "sysrq $?"
(echo 1 > /proc/sys/kernel/sysrq) 2>/dev/null; echo "sysctl $?"
"""
    result = await sandbox.run(code, "bash")
    outcomes = dict(line.split() for line in result.stdout.splitlines())
    assert set(outcomes) == {"unshare", "mount", "sysrq", "sysctl"}
    # Denied, not missing: 127 would mean the command itself was not found.
    assert all(code not in {"0", "127"} for code in outcomes.values()), outcomes


async def test_file_descriptor_exhaustion_hits_emfile(sandbox: DockerSandbox) -> None:
    code = """
import errno, os
opened = []
try:
    while True:
        opened.append(os.open('/dev/null', os.O_RDONLY))
except OSError as exc:
    print(errno.errorcode[exc.errno], len(opened))
"""
    result = await sandbox.run(code)
    assert result.ok, result
    error, count = result.stdout.split()
    assert error == "EMFILE"
    assert sandbox.config.open_files_limit - 10 <= int(count) < sandbox.config.open_files_limit


async def test_oversized_file_is_refused(sandbox: DockerSandbox) -> None:
    code = """
import errno
try:
    with open('/tmp/big', 'wb') as handle:
        handle.write(b'x' * (17 * 1024 * 1024))
except OSError as exc:
    print(errno.errorcode[exc.errno])
"""
    result = await sandbox.run(code)
    assert result.stdout == "EFBIG\n", result


async def test_input_gets_end_of_file_at_once(sandbox: DockerSandbox) -> None:
    code = "try:\n    input('name? ')\nexcept EOFError:\n    print('EOF')\n"
    result = await sandbox.run(code)
    assert result.ok
    assert result.stdout == "name? EOF\n"
    bash = await sandbox.run('read -r line; echo "read=$? line=[$line]"', "bash")
    assert bash.stdout == "read=1 line=[]\n"


async def test_bash_runs_blocks(sandbox: DockerSandbox) -> None:
    code = 'for i in 1 2 3; do echo "n=$i"; done\necho oops >&2\nexit 3\n'
    result = await sandbox.run(code, "sh")
    assert result.language == "bash"
    assert result.stdout == "n=1\nn=2\nn=3\n"
    assert result.stderr == "oops\n"
    assert result.exit_code == 3
