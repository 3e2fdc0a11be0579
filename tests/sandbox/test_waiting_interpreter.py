"""A Python program's interpreter starts before its program and waits for it.

In a pooled container that is before the run, in a cold one while the supervisor reads
the program: whichever way, the program must meet what ``python3 main.py`` gives it, and
nothing the interpreter's start prints may reach the streams before the acknowledgement.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import secrets
import shlex
from collections.abc import AsyncIterator, Iterator

import docker
import docker.errors
import pytest

from sandcrew.sandbox import DockerSandbox, ExecutionResult, SandboxConfig
from tests.sandbox.conftest import IMAGE
from tests.sandbox.helpers import waiting_members

pytestmark = pytest.mark.docker

WHAT_THE_PROGRAM_SEES = """\
import json, os, sys
descriptors = sorted(int(name) for name in os.listdir("/proc/self/fd"))
print(json.dumps({
    "file": __file__,
    "argv": sys.argv,
    "path0": sys.path[0],
    "name": __name__,
    "stdout_seekable": sys.stdout.seekable(),
    "stderr_seekable": sys.stderr.seekable(),
    "stdin": sys.stdin.read(),
    "descriptors": descriptors,
    "uid_is_root": os.getuid() == 0,
    "main_py": oct(os.stat(__file__).st_mode),
    "source_first_line": open(__file__).readline(),
}))
ticks = os.sysconf("SC_CLK_TCK")
started = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / ticks
print(float(open("/proc/uptime").read().split()[0]) - started)
"""

FAILING = "x = 1\n\nraise ValueError('boom')\n"

EXPECTED_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/workspace/main.py", line 3, in <module>\n'
    "    raise ValueError('boom')\n"
    "ValueError: boom\n"
)


@pytest.fixture(params=["cold", "pooled"])
async def sandbox(
    request: pytest.FixtureRequest, docker_client: docker.DockerClient
) -> AsyncIterator[DockerSandbox]:
    config = SandboxConfig(timeout=5.0, pool_size=1 if request.param == "pooled" else 0)
    async with DockerSandbox(config, docker_client=docker_client) as started:
        yield started


async def served_by_a_waiting_member(
    sandbox: DockerSandbox, docker_client: docker.DockerClient, code: str, language: str = "python"
) -> ExecutionResult:
    """Run ``code``; in a pooled sandbox, only once a member has been waiting a while."""
    if sandbox.config.pool_size:
        await asyncio.sleep(1.0)  # its interpreter has long started
        waiting = waiting_members(docker_client)
        result = await sandbox.run(code, language)
        assert result.run_id in waiting
        return result
    return await sandbox.run(code, language)


async def test_the_program_meets_what_python3_main_py_gives_it(
    sandbox: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    result = await served_by_a_waiting_member(sandbox, docker_client, WHAT_THE_PROGRAM_SEES)

    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    seen_line, age_line = result.stdout.splitlines()
    if sandbox.config.pool_size:
        # The program's process (its interpreter) started before the run came, a second ago.
        assert float(age_line) > 0.5
    seen = json.loads(seen_line)
    assert seen == {
        "file": "/workspace/main.py",
        "argv": ["/workspace/main.py"],
        "path0": "/workspace",
        "name": "__main__",
        # Pipes, as the container's streams are (the interpreter started on pipes too).
        "stdout_seekable": False,
        "stderr_seekable": False,
        "stdin": "",
        # 0, 1, 2 and the listing's own: nothing of the wait is left open.
        "descriptors": [0, 1, 2, 3],
        "uid_is_root": False,
        "main_py": "0o100600",
        "source_first_line": "import json, os, sys\n",
    }


async def test_a_traceback_shows_the_program_only(
    sandbox: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    result = await served_by_a_waiting_member(sandbox, docker_client, FAILING)

    assert (result.exit_code, result.stdout, result.stderr) == (1, "", EXPECTED_TRACEBACK)


async def test_python_processes_the_program_starts_do_not_wait(
    sandbox: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    # The program's own descriptor 3 (a pipe holding four bytes, left open for its
    # children), then Python children that inherit it: none of them may take it for the
    # program pipe of a waiting interpreter.
    code = (
        "import os, subprocess, sys\n"
        "read_end, write_end = os.pipe()\n"
        "assert read_end == 3, read_end\n"
        "os.set_inheritable(read_end, True)\n"
        "os.write(write_end, b'kept')\n"
        "child = subprocess.run([sys.executable, '-c', 'print(6 * 7)'], close_fds=False,\n"
        "                       capture_output=True, text=True, timeout=5)\n"
        "print(child.returncode, child.stdout.strip(), repr(child.stderr))\n"
        "print(os.system('python3 -c \"import os; print(sorted(os.environ))\" > env.txt'))\n"
        "print('SANDCREW' in open('env.txt').read(), 'SANDCREW' in str(sorted(os.environ)))\n"
        "print(os.read(read_end, 4))\n"
    )

    result = await served_by_a_waiting_member(sandbox, docker_client, code)

    assert result.exit_code == 0, result.stderr
    assert result.stdout == "0 42 ''\n0\nFalse False\nb'kept'\n"


async def test_a_program_larger_than_a_pipe_holds(
    sandbox: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    filler = "x" * 300_000  # the pipe it travels on holds 64 KiB
    code = f"text = {filler!r}\nprint(len(text), len(open(__file__).read()))\n"

    result = await served_by_a_waiting_member(sandbox, docker_client, code)

    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"300000 {len(code)}\n"


async def test_input_files_and_the_output_folder_are_there_when_the_program_starts(
    sandbox: DockerSandbox,
) -> None:
    code = (
        "import os\n"
        "mode = oct(os.stat('data/in.txt').st_mode)\n"
        "print(open('data/in.txt').read(), mode, os.path.isdir('out'))\n"
        "try:\n"
        "    open('data/in.txt', 'w')\n"
        "except PermissionError:\n"
        "    print('read-only')\n"
        "open('out/result.txt', 'w').write('made')\n"
    )
    if sandbox.config.pool_size:
        await asyncio.sleep(1.0)

    result = await sandbox.run(code, files={"data/in.txt": b"given"})

    assert result.exit_code == 0, result.stderr
    assert result.stdout == "given 0o100444 True\nread-only\n"
    assert [(artifact.name, artifact.data) for artifact in result.artifacts] == [
        ("result.txt", b"made")
    ]


async def test_a_bash_run_ends_the_python_interpreter_that_waited(
    docker_client: docker.DockerClient,
) -> None:
    # Every process's command line, but the supervisor's (its own is the packed sources);
    # then the sitecustomize only a Python interpreter that waited in this container wrote.
    listing = (
        'for status in /proc/[0-9]*/cmdline; do tr "\\0" " " < "$status"; echo; done'
        " | grep -v -- '-I -S -c' | grep -v '^$' | sort\n"
        "ls /tmp/.sandcrew-site\n"
    )
    config = SandboxConfig(timeout=5.0, pool_size=1)
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        result = await served_by_a_waiting_member(sandbox, docker_client, listing, "bash")
        python_after = await sandbox.run("print('python still runs')")

    assert result.exit_code == 0, result.stderr
    commands = result.stdout.splitlines()
    assert commands[-1] == "sitecustomize.py"
    assert not [command for command in commands if "python3 /workspace/main.py" in command]
    assert any("main.sh" in command for command in commands)
    assert python_after.stdout == "python still runs\n"


def image_with_pth(client: docker.DockerClient, line: str) -> str:
    """The sandbox image with a .pth file holding ``line``, run at every Python start."""
    tag = f"sandcrew-test/pth:{secrets.token_hex(4)}"
    site_packages = "$(python3 -c 'import site; print(site.getsitepackages()[0])')"
    dockerfile = (
        f"FROM {IMAGE}\n"
        "USER 0:0\n"
        f"RUN printf '%s\\n' {shlex.quote(line)} > \"{site_packages}/sandcrew_test.pth\"\n"
        "USER 10001:10001\n"
    )
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, pull=False, rm=True)
    return tag


@pytest.fixture(scope="module")
def pth_images() -> Iterator[dict[str, str]]:
    """A noisy image (its start prints on both streams) and a broken one (its start fails)."""
    client = docker.from_env()
    images = {
        "noisy": image_with_pth(
            client,
            'import sys; print("noise on stdout"); print("noise on stderr", file=sys.stderr)',
        ),
        "broken": image_with_pth(
            client, 'import os; os.write(2, b"this image is broken\\n"); os._exit(3)'
        ),
    }
    try:
        yield images
    finally:
        for tag in images.values():
            with contextlib.suppress(docker.errors.APIError):
                client.images.remove(tag, force=True)
        client.close()


@pytest.mark.parametrize("pool_size", [0, 1])
async def test_what_the_interpreter_start_prints_goes_to_stderr_after_the_acknowledgement(
    pth_images: dict[str, str], docker_client: docker.DockerClient, pool_size: int
) -> None:
    config = SandboxConfig(images={"python": pth_images["noisy"]}, timeout=5.0, pool_size=pool_size)
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        result = await served_by_a_waiting_member(sandbox, docker_client, "print('the program')")

    # Neither the acknowledgement nor the program's stdout is disturbed; a pooled
    # container whose interpreter printed while it waited still serves its run.
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "the program\n"
    assert result.stderr == "noise on stdout\nnoise on stderr\n"


@pytest.mark.parametrize("pool_size", [0, 1])
async def test_an_interpreter_that_cannot_start_says_why_as_python3_would(
    pth_images: dict[str, str], docker_client: docker.DockerClient, pool_size: int
) -> None:
    config = SandboxConfig(
        images={"python": pth_images["broken"]}, timeout=5.0, pool_size=pool_size
    )
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        result = await served_by_a_waiting_member(sandbox, docker_client, "print('never')")

    assert (result.exit_code, result.stdout, result.stderr) == (3, "", "this image is broken\n")


async def test_a_pooled_run_whose_waiting_interpreter_was_killed_starts_its_program_anew(
    docker_client: docker.DockerClient,
) -> None:
    # Killed as root from outside (as the OOM killer or an operator might): the run must not
    # be lost to it, input files included (the dead interpreter left its sitecustomize).
    kill_the_waiting_interpreter = [
        "sh",
        "-c",
        "for status in /proc/[0-9]*/cmdline; do "
        'if [ "$(tr "\\0" " " < "$status")" = "python3 /workspace/main.py " ]; then '
        'pid=${status#/proc/}; kill -9 "${pid%/cmdline}"; echo killed; fi; done',
    ]
    config = SandboxConfig(timeout=5.0, pool_size=1)
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        await asyncio.sleep(1.0)
        [(run_id, container_id)] = waiting_members(docker_client).items()
        told = ""
        for _ in range(20):  # its supervisor may still be starting on a loaded machine
            execution = docker_client.api.exec_create(container_id, kill_the_waiting_interpreter)
            told = docker_client.api.exec_start(execution["Id"]).decode()
            if told:
                break
            await asyncio.sleep(0.25)
        await asyncio.sleep(0.2)
        result = await sandbox.run(
            "import os\nprint(open('in.txt').read(), os.getppid() != 1)", files={"in.txt": b"kept"}
        )

    assert told == "killed\n"
    assert result.run_id == run_id
    assert (result.exit_code, result.stdout, result.stderr) == (0, "kept True\n", "")
