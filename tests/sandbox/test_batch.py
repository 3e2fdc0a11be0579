"""Batch isolation: hostile tasks in one shared container change nothing for the others."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import docker
import pytest

from sandcrew.sandbox import BatchSandbox, ExecutionResult, OutputEvent, SandboxConfig
from sandcrew.sandbox._streams import shutdown_connection
from tests.sandbox.helpers import container_state

pytestmark = pytest.mark.docker

CONFIG = SandboxConfig(timeout=5.0, max_output_bytes=64 * 1024)

# A bystander that runs next to the attacks: it writes and reads back a file in
# its own directory, forks a child, and sleeps through the attack.
BYSTANDER = """
import os, time
with open("mine.txt", "w") as handle:
    handle.write("intact")
time.sleep(1.5)
child = os.fork()
if child == 0:
    os._exit(7)
assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 7
assert open("mine.txt").read() == "intact"
assert sorted(os.listdir(".")) == ["main.py", "mine.txt"], os.listdir(".")
print("bystander ok")
"""

# What a later task can see of earlier ones: other processes, leftovers in the
# shared places, the earlier task's directory.
SURVEY = """
import os, sys
others = []
for name in os.listdir("/proc"):
    if name.isdigit() and int(name) != os.getpid():
        uid = os.stat("/proc/" + name).st_uid
        if uid != 0:
            others.append((name, uid))
print("others", others)
print("tmp", sorted(os.listdir("/tmp")), sorted(os.listdir("/dev/shm")))
print("earlier", [os.path.exists(path) for path in sys.argv[1:] or PATHS])
"""


@pytest.fixture
async def batch(docker_client: docker.DockerClient) -> AsyncIterator[BatchSandbox]:
    async with BatchSandbox(CONFIG, slots=3, docker_client=docker_client) as started:
        yield started


async def _beside_bystanders(
    batch: BatchSandbox, attack: str, language: str = "python"
) -> ExecutionResult:
    """Run ``attack`` while two bystanders run in the same container; they must not notice."""
    hostile, *bystanders = await asyncio.gather(
        batch.run(attack, language), batch.run(BYSTANDER), batch.run(BYSTANDER)
    )
    for result in bystanders:
        assert result.exit_code == 0, result
        assert result.stdout == "bystander ok\n"
    return hostile


async def test_each_task_has_its_own_uid_directory_and_empty_start(batch: BatchSandbox) -> None:
    code = "import os; print(os.getuid(), os.getcwd(), os.environ['TMPDIR'], os.listdir('.'))"
    first, second = await asyncio.gather(batch.run(code), batch.run(code))
    assert first.exit_code == second.exit_code == 0
    uid_a, dir_a, tmp_a, listing_a = first.stdout.split(" ", 3)
    uid_b, dir_b, _, _ = second.stdout.split(" ", 3)
    assert uid_a != uid_b
    assert int(uid_a) > 0
    assert int(uid_b) > 0
    assert dir_a != dir_b
    assert tmp_a == dir_a
    assert listing_a.strip() == "['main.py']"
    assert first.run_id == second.run_id  # one container served both


async def test_a_daemon_does_not_outlive_its_task(batch: BatchSandbox) -> None:
    daemon = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(60)
    os._exit(0)
print(os.getcwd())
"""
    hostile = await _beside_bystanders(batch, daemon)
    assert hostile.exit_code == 0
    survey = await batch.run(SURVEY.replace("PATHS", repr([hostile.stdout.strip()])))
    assert survey.exit_code == 0, survey
    assert "others []" in survey.stdout
    assert "earlier [False]" in survey.stdout


async def test_tmp_and_dev_shm_are_unwritable_and_the_task_directory_is_gone(
    batch: BatchSandbox,
) -> None:
    writer = """
import os
for place in ("/tmp/left", "/dev/shm/left", os.path.join(os.path.dirname(os.getcwd()), "x")):
    try:
        open(place, "w").write("left behind")
        print("wrote", place)
    except OSError as error:
        print("refused", place, type(error).__name__)
open(os.path.join(os.environ["TMPDIR"], "scratch"), "w").write("mine")
print(os.getcwd())
"""
    hostile = await _beside_bystanders(batch, writer)
    lines = hostile.stdout.splitlines()
    assert lines[0].startswith("refused /tmp/left")
    assert lines[1].startswith("refused /dev/shm/left")
    # Its own sibling file in the shared workdir is allowed but cleaned after it.
    survey = await batch.run(SURVEY.replace("PATHS", repr([lines[-1]])))
    assert "tmp [] []" in survey.stdout, survey
    assert "earlier [False]" in survey.stdout
    listing = await batch.run("import os; print(os.listdir(os.path.dirname(os.getcwd())))")
    assert "PermissionError" in listing.stderr


async def test_supervisor_and_other_tasks_cannot_be_signalled_traced_or_read(
    batch: BatchSandbox,
) -> None:
    attack = """
import ctypes, os, signal, time
time.sleep(0.5)  # the bystanders are running now
libc = ctypes.CDLL(None, use_errno=True)
done = []
for name in os.listdir("/proc"):
    if not name.isdigit() or int(name) == os.getpid():
        continue
    pid = int(name)
    for attempt in ("kill", "ptrace", "environ", "mem", "cwd"):
        try:
            if attempt == "kill":
                os.kill(pid, signal.SIGKILL)
            elif attempt == "ptrace":
                if libc.ptrace(16, pid, 0, 0) != 0:  # PTRACE_ATTACH
                    raise OSError(ctypes.get_errno(), "ptrace")
            elif attempt == "cwd":
                os.listdir("/proc/%d/cwd" % pid)
            else:
                open("/proc/%d/%s" % (pid, attempt), "rb").read(1)
            done.append((pid, attempt))
        except OSError:
            pass
print("done", done)
"""
    hostile = await _beside_bystanders(batch, attack)
    assert hostile.stdout == "done []\n", hostile


async def test_a_task_s_output_is_told_once_it_ended(batch: BatchSandbox) -> None:
    told: list[OutputEvent] = []
    program = "import sys\nprint('out')\nprint('err', file=sys.stderr)"
    result = await batch.run(program, on_output=told.append)
    assert [(event.stream, event.text) for event in told] == [
        ("stdout", "out\n"),
        ("stderr", "err\n"),
    ]
    assert (result.stdout, result.stderr) == ("out\n", "err\n")


async def test_output_flood_is_cut_and_harms_no_one(batch: BatchSandbox) -> None:
    flood = "import sys\nfor _ in range(2000):\n    sys.stdout.write('x' * 65536)\n"
    hostile = await _beside_bystanders(batch, flood)
    assert hostile.stdout_truncated
    assert len(hostile.stdout) == CONFIG.max_output_bytes


async def test_memory_and_process_exhaustion_stay_the_task_s_own(batch: BatchSandbox) -> None:
    memory = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))\n"
    hostile = await _beside_bystanders(batch, memory)
    assert hostile.exit_code != 0
    assert "MemoryError" in hostile.stderr
    bomb = """
import os, time
count = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        count += 1
except OSError as error:
    print("refused after", count)
"""
    hostile = await _beside_bystanders(batch, bomb)
    assert hostile.stdout.startswith("refused after")
    assert int(hostile.stdout.split()[-1]) < CONFIG.pids_limit


async def test_a_forged_result_frame_is_only_output(batch: BatchSandbox) -> None:
    forger = r"""
import sys
for guess in ("\x1e", "\x1e0000 ", "\x1e%s " % ("a" * 32)):
    for stream in (sys.stdout, sys.stderr):
        stream.write(guess + "t 0 0 0 0 0 0\n")
        stream.flush()
sys.exit(1)
"""
    hostile = await _beside_bystanders(batch, forger)
    assert hostile.exit_code == 1
    assert hostile.stdout.count("t 0 0 0 0 0 0") == 3


async def test_a_task_that_times_out_ends_with_its_processes(batch: BatchSandbox) -> None:
    sleeper = "import os, time\nos.fork()\ntime.sleep(60)\n"
    result = await batch.run(sleeper, timeout=1.0)
    assert result.timed_out
    survey = await batch.run(SURVEY.replace("PATHS", "[]"))
    assert "others []" in survey.stdout


async def test_a_lost_container_fails_no_run_and_the_batch_goes_on(
    batch: BatchSandbox, docker_client: docker.DockerClient
) -> None:
    first = await batch.run("print('first')")
    running = asyncio.ensure_future(batch.run("import time\ntime.sleep(1.5)\nprint('survived')"))
    await asyncio.sleep(0.5)
    docker_client.api.kill(f"sandcrew-{first.run_id}")
    survived = await running
    # Run again alone, in a container of its own.
    assert survived.exit_code == 0
    assert survived.stdout == "survived\n"
    assert survived.run_id != first.run_id
    after = await batch.run("print('after')")
    assert after.stdout == "after\n"
    assert after.run_id not in (first.run_id, survived.run_id)


async def test_a_batch_says_which_packages_its_images_have(
    docker_client: docker.DockerClient,
) -> None:
    data = SandboxConfig(images={"python": "sandcrew/python-data:latest"})
    async with (
        BatchSandbox(docker_client=docker_client) as plain,
        BatchSandbox(data, docker_client=docker_client) as scientific,
    ):
        assert await plain.image_packages() == ("ipython 8.31.0", "pip 24.3.1")
        packages = await scientific.image_packages()

    assert packages is not None
    assert "pandas 2.2.3" in packages


async def test_a_batch_container_whose_owner_is_gone_is_removed_by_the_engine(
    docker_client: docker.DockerClient,
) -> None:
    # What the engine sees when the owner dies without any cleanup (a Ray worker killed with
    # its driver): the attach connection closes, so the container's stdin does, its
    # supervisor ends its task and exits, and the engine removes the container (AutoRemove).
    async with BatchSandbox(SandboxConfig(), slots=1, docker_client=docker_client) as sandbox:
        running = asyncio.ensure_future(sandbox.run("import time\ntime.sleep(120)"))
        for _ in range(300):
            if sandbox._container is not None:
                break
            await asyncio.sleep(0.1)
        assert sandbox._container is not None, "the batch container never started"
        batch_container = sandbox._container.launched.container_id
        inspected = docker_client.api.inspect_container(batch_container)
        assert inspected["HostConfig"]["AutoRemove"], "the engine would leave it behind"
        shutdown_connection(sandbox._container.launched.connection)
        # Gone within a second when the engine is idle. On a loaded engine the removal can
        # take long or fail (the container is then "removing" or "dead", stopped, for the
        # reaper): what must never be is a container still running, or one the engine is
        # not removing ("exited"). The program sleeps for 120 s, so 60 s still tells.
        state = "running"
        for _ in range(300):
            state = container_state(docker_client, batch_container)
            if state in ("gone", "dead"):
                break
            await asyncio.sleep(0.2)
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)

    assert state in ("gone", "dead", "removing"), (
        f"the batch container is {state} 60 s after its connection closed"
    )
