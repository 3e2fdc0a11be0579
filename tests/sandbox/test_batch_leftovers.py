"""Nothing of a batch task survives it, and its cleanup costs its neighbours nothing.

Each test runs a hostile task, then (or beside it) correct neighbours in the
same batch container: they must pass, and every verdict must be the one a
container of its own (``--isolation task``) gives.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import docker
import pytest

from sandcrew.sandbox import BatchSandbox, DockerSandbox, ExecutionResult, SandboxConfig

pytestmark = [pytest.mark.docker, pytest.mark.slow]

MIB = 1024 * 1024
DISK = SandboxConfig(timeout=5.0, workdir_tmpfs_bytes=32 * MIB)

# A correct neighbour that needs most of the disk of one slot.
WRITES_24_MIB = """
import os
for number in range(3):  # files of 8 MiB: under the file size limit
    with open(str(number), "wb") as handle:
        handle.write(b"x" * (8 << 20))
print("wrote", sum(os.path.getsize(str(number)) for number in range(3)) >> 20)
"""

# 1,500 levels, a file at each (deeper than a recursive delete can go), then the disk filled.
DEEP_TREE_AND_FULL_DISK = """
import os
folder = os.open(".", os.O_RDONLY)
for level in range(1500):
    os.mkdir("d", dir_fd=folder)
    handle = os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=folder)
    os.write(handle, b"x" * 100)
    os.close(handle)
    below = os.open("d", os.O_RDONLY, dir_fd=folder)
    os.close(folder)
    folder = below
try:
    for number in range(1000):  # files of 1 MiB: under the file size limit
        handle = os.open(str(number), os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=folder)
        os.write(handle, b"x" * (1 << 20))
        os.close(handle)
except OSError as error:
    print("filled:", error.strerror)
"""

# The main process ends at once; a daemon it left keeps making hard links to a 12 MiB
# file at the top of the shared workdir until it is killed.
LINKS_AFTER_THE_END = """
import os, secrets, time
top = os.path.dirname(os.getcwd())
first = os.path.join(top, secrets.token_hex(8))
with open(first, "wb") as handle:
    handle.write(b"x" * (12 << 20))
if os.fork() == 0:
    os.setsid()
    while True:
        try:
            os.link(first, os.path.join(top, secrets.token_hex(8)))
        except OSError:
            pass
print("left a daemon")
"""

# Takes away its own rights in its folders, 16 MiB in them: its reaper runs as its uid.
LOCKS_ITS_OWN_FOLDERS = """
import os
os.makedirs("a/b/c")
for folder in ("a/b/c", "a/b", "a", "."):
    with open(os.path.join(folder, "f"), "wb") as handle:
        handle.write(b"x" * (4 << 20))
os.chmod("a/b/c", 0o500)  # can be listed, nothing in it deleted
os.chmod("a/b", 0o000)
os.chmod("a", 0o100)
os.chmod(".", 0o500)
print("locked")
"""

# SysV IPC objects open to every uid, and a POSIX queue, left behind.
LEAVES_IPC = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
segment = libc.shmget(0x5A17, 4096, 0o1000 | 0o666)
address = libc.shmat(segment, None, 0)
ctypes.memmove(address, b"secret of an earlier task", 25)
queue = libc.msgget(0x5A18, 0o1000 | 0o666)
message = ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_long) + 16)
ctypes.memset(message, 1, 1)
libc.msgsnd(queue, message, 16, 0)
semaphores = libc.semget(0x5A19, 1, 0o1000 | 0o666)
mq = libc.mq_open(b"/sandcrew-left", os.O_CREAT | os.O_RDWR, 0o666, None)
print("made", segment >= 0, queue >= 0, semaphores >= 0, "posix queue", mq >= 0)
"""

LOOKS_FOR_IPC = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
found = [libc.shmget(0x5A17, 0, 0), libc.msgget(0x5A18, 0), libc.semget(0x5A19, 0, 0)]
print("found", [ident >= 0 for ident in found])
print("posix queue", libc.mq_open(b"/sandcrew-left", os.O_RDWR) >= 0)
print("mqueue writable", os.access("/dev/mqueue", os.W_OK))
"""

# Shared memory left charged to the container's memory, 96 MiB of its 128.
LEAVES_CHARGED_MEMORY = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
for key in range(3):
    segment = libc.shmget(0x6000 + key, 32 << 20, 0o1000 | 0o600)
    address = libc.shmat(segment, None, 0)
    ctypes.memset(address, 1, 32 << 20)
    libc.shmdt(ctypes.c_void_p(address))
print("left 96 MiB")
"""

USES_64_MIB = """
memory = bytearray(64 << 20)
for index in range(0, len(memory), 4096):
    memory[index] = 1
print("used", len(memory) >> 20)
"""


# Ends at its deadline with 64 busy processes (its whole limit): its reaper leaves 64
# zombies for PID 1 to reap while the other slot's copy takes the container's CPU.
TAKES_EVERY_PROCESS = """
import os
for _ in range(63):
    try:
        if os.fork() == 0:
            break
    except OSError:
        break
while True:
    pass
"""

# Needs 60 processes at once (none is reaped before the last fork): it passes only when
# the container gives them.
NEEDS_60_PROCESSES = """
import os
children = []
for _ in range(60):
    child = os.fork()
    if child == 0:
        os._exit(0)
    children.append(child)
for child in children:
    os.waitpid(child, 0)
print("forked", len(children))
"""

REAPER = Path(__file__).resolve().parents[2] / "sandbox" / "_inside" / "reaper.py"
# Appended to the reaper's source: a child this program never waits for, then asked about.
MAKES_A_ZOMBIE_AND_ASKS = """
me = os.getuid()
child = os.fork()
if child == 0:
    os._exit(0)
time.sleep(0.3)  # a zombie now: its parent has not waited for it
soon = time.monotonic() + 0.2
print(has_processes(me), has_processes(me, counting_zombies=True), wait_until_reaped(me, soon))
os.waitpid(child, 0)
print(has_processes(me, counting_zombies=True), wait_until_reaped(me, time.monotonic()))
"""


async def _alone(docker_client: docker.DockerClient, config: SandboxConfig, code: str) -> str:
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        return _verdict(await sandbox.run(code))


def _verdict(result: ExecutionResult) -> str:
    return f"{result.exit_code} {result.timed_out} {result.stdout}"


@pytest.mark.parametrize(
    ("hostile_program", "hostile_stdout"),
    [
        (DEEP_TREE_AND_FULL_DISK, "filled: No space left on device\n"),
        # Alone, a container has no folder above the program's that it could write in.
        (LINKS_AFTER_THE_END, "left a daemon\n"),
        (LOCKS_ITS_OWN_FOLDERS, "locked\n"),
    ],
    ids=["deep-tree-and-full-disk", "links-made-while-it-is-ended", "folders-locked-by-it"],
)
async def test_what_a_task_leaves_is_gone_before_the_next_task(
    docker_client: docker.DockerClient, hostile_program: str, hostile_stdout: str
) -> None:
    async with BatchSandbox(DISK, slots=1, docker_client=docker_client) as batch:
        hostile = await batch.run(hostile_program)
        neighbours = [await batch.run(WRITES_24_MIB) for _ in range(3)]
    assert (hostile.exit_code, hostile.stdout) == (0, hostile_stdout), hostile
    for neighbour in neighbours:
        assert (neighbour.exit_code, neighbour.stdout) == (0, "wrote 24\n"), neighbour
        assert neighbour.run_id == hostile.run_id  # cleaned in place, not run elsewhere
    if hostile_program != LINKS_AFTER_THE_END:
        assert _verdict(hostile) == await _alone(docker_client, DISK, hostile_program)


async def test_ipc_objects_of_a_task_do_not_outlive_it(
    docker_client: docker.DockerClient,
) -> None:
    async with BatchSandbox(DISK, slots=1, docker_client=docker_client) as batch:
        hostile = await batch.run(LEAVES_IPC)
        later = await batch.run(LOOKS_FOR_IPC)
    # The POSIX queue cannot even be made: /dev/mqueue is root's, like /tmp and /dev/shm.
    assert hostile.stdout == "made True True True posix queue False\n", hostile
    assert later.run_id == hostile.run_id
    assert later.stdout == (
        "found [False, False, False]\nposix queue False\nmqueue writable False\n"
    ), later


async def test_shared_memory_left_charged_kills_no_later_task(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(timeout=5.0, memory_bytes=128 * MIB)
    async with BatchSandbox(config, slots=1, docker_client=docker_client) as batch:
        hostile = await batch.run(LEAVES_CHARGED_MEMORY)
        neighbours = [await batch.run(USES_64_MIB) for _ in range(3)]
    assert (hostile.exit_code, hostile.stdout) == (0, "left 96 MiB\n"), hostile
    for neighbour in neighbours:
        assert (neighbour.exit_code, neighbour.stdout) == (0, "used 64\n"), neighbour
        assert neighbour.run_id == hostile.run_id


async def test_a_task_the_container_cannot_start_runs_again_alone(
    docker_client: docker.DockerClient,
) -> None:
    fills_and_waits = """
import time
try:
    for number in range(1000):  # files of 1 MiB: under the file size limit
        with open(str(number), "wb") as handle:
            handle.write(b"x" * (1 << 20))
except OSError as error:
    print("filled:", error.strerror)
time.sleep(6)
"""
    config = DISK.model_copy(update={"timeout": 10.0})
    async with BatchSandbox(config, slots=2, docker_client=docker_client) as batch:
        hostile = asyncio.ensure_future(batch.run(fills_and_waits))
        await asyncio.sleep(3)
        neighbour = await batch.run("print('started')")
        hostile_result = await hostile
    assert hostile_result.stdout == "filled: No space left on device\n", hostile_result
    # Its main.py could not be written (no space left): a fault of the container, not a fail.
    assert (neighbour.exit_code, neighbour.stdout) == (0, "started\n"), neighbour
    assert neighbour.run_id != hostile_result.run_id


async def test_neighbours_are_judged_by_when_they_ended_while_a_big_tree_is_deleted(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(timeout=5.0, workdir_tmpfs_bytes=256 * MIB)
    # Three processes make 90,000 folders (seconds to delete; about 100 MiB of the kernel's
    # memory, within the container's) and wait; the main process ends after 2.5 s, they
    # are ended with it. The bound keeps the attack about time, not memory.
    makes_folders = """
import os, time
for _ in range(3):
    if os.fork() == 0:
        os.mkdir(str(os.getpid()))
        os.chdir(str(os.getpid()))
        for number in range(30_000):
            os.mkdir(str(number))
        time.sleep(60)
time.sleep(2.5)
print("made folders")
"""
    # One slot for the attack, one for a row of short neighbours: one of them is running
    # when the attack ends and its folders are deleted. A generous cleanup bound keeps
    # every run in the one container whatever the machine's load.
    quick = "import time\ntime.sleep(0.25)\nprint('quick')"
    async with BatchSandbox(
        config, slots=2, cleanup_seconds=60.0, docker_client=docker_client
    ) as batch:
        hostile, *neighbours = await asyncio.gather(
            batch.run(makes_folders),
            *(batch.run(quick, timeout=2.0) for _ in range(10)),
        )
    assert (hostile.exit_code, hostile.stdout) == (0, "made folders\n"), hostile
    for neighbour in neighbours:
        assert (neighbour.exit_code, neighbour.timed_out, neighbour.stdout) == (0, False, "quick\n")
        assert neighbour.run_id == hostile.run_id  # judged in the container that cleaned up


# Two colluding tasks: the giver writes 45 MiB and passes its open files to the holder
# over an abstract unix socket, then ends; its reaper deletes the files, but their space
# stays taken while the holder keeps them open.
HOLDS_PASSED_FILES = """
import array, socket, time
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(b"\\0sandcrew-space-holder")
server.listen(1)
connection, _ = server.accept()
_, ancillary, _, _ = connection.recvmsg(1, socket.CMSG_SPACE(16 * 4))
held = array.array("i", ancillary[0][2])
time.sleep(3)
print("held", len(held))
"""
GIVES_ITS_FILES_AWAY = """
import os, socket, time
handles = []
for number in range(3):  # files of 15 MiB: under the file size limit
    handle = os.open(str(number), os.O_RDWR | os.O_CREAT, 0o600)
    os.write(handle, b"x" * (15 << 20))
    handles.append(handle)
client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
for _ in range(200):
    try:
        client.connect(b"\\0sandcrew-space-holder")
        break
    except OSError:
        time.sleep(0.01)
socket.send_fds(client, [b"x"], handles)
print("gave", len(handles))
"""


async def test_space_an_ended_task_still_holds_sends_the_next_task_elsewhere(
    docker_client: docker.DockerClient,
) -> None:
    # Two slots of 32 MiB: 45 MiB held past the giver's end leaves 19 MiB, less than the
    # 24 MiB the correct neighbour writes (ENOSPC had it started in that container).
    config = DISK.model_copy(update={"timeout": 10.0})
    async with BatchSandbox(config, slots=2, docker_client=docker_client) as batch:
        holder = asyncio.ensure_future(batch.run(HOLDS_PASSED_FILES))
        await asyncio.sleep(1)
        giver = asyncio.ensure_future(batch.run(GIVES_ITS_FILES_AWAY))
        await asyncio.sleep(0.5)
        neighbour = asyncio.ensure_future(batch.run(WRITES_24_MIB))
        holder_result, giver_result, neighbour_result = await asyncio.gather(
            holder, giver, neighbour
        )
    assert (giver_result.exit_code, giver_result.stdout) == (0, "gave 3\n"), giver_result
    assert (holder_result.exit_code, holder_result.stdout) == (0, "held 3\n"), holder_result
    assert holder_result.run_id == giver_result.run_id
    assert (neighbour_result.exit_code, neighbour_result.stdout) == (0, "wrote 24\n"), (
        neighbour_result
    )
    # Not started where the giver's space was still held: in the next batch container.
    assert neighbour_result.run_id != giver_result.run_id
    assert _verdict(neighbour_result) == await _alone(docker_client, config, WRITES_24_MIB)


async def test_a_neighbour_killed_for_the_shared_memory_runs_again_alone(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(timeout=10.0, memory_bytes=128 * MIB)
    # Detached shared memory counts against the container's memory but against no
    # process: when it is full, the kernel kills the process that holds the most.
    fills_shared_memory = """
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
time.sleep(1.5)
for key in range(12):
    segment = libc.shmget(0x7000 + key, 32 << 20, 0o1000 | 0o600)
    address = libc.shmat(segment, None, 0)
    ctypes.memset(address, 1, 32 << 20)
    libc.shmdt(ctypes.c_void_p(address))
print("filled")
"""
    holds_memory = """
import time
memory = bytearray(80 << 20)
for index in range(0, len(memory), 4096):
    memory[index] = 1
time.sleep(4)
print("held", len(memory) >> 20)
"""
    async with BatchSandbox(config, slots=2, docker_client=docker_client) as batch:
        hostile, neighbour = await asyncio.gather(
            batch.run(fills_shared_memory), batch.run(holds_memory)
        )
    assert (neighbour.exit_code, neighbour.stdout) == (0, "held 80\n"), neighbour
    # Killed in the batch container (it held the most), it was judged in a container of
    # its own: the kill was the container's fault, not its verdict.
    assert neighbour.run_id != hostile.run_id
    alone = await _alone(docker_client, config, fills_shared_memory)
    assert _verdict(hostile) == alone


async def test_a_container_whose_cleanup_runs_out_of_time_retires(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(timeout=10.0, workdir_tmpfs_bytes=256 * MIB)
    # Three processes make 60,000 folders: far more than one process deletes in 50 ms.
    makes_many_folders = """
import os, time
for _ in range(3):
    if os.fork() == 0:
        os.mkdir(str(os.getpid()))
        os.chdir(str(os.getpid()))
        for number in range(20_000):
            os.mkdir(str(number))
        time.sleep(60)
time.sleep(4)
print("made folders")
"""
    async with BatchSandbox(
        config, slots=1, cleanup_seconds=0.05, docker_client=docker_client
    ) as batch:
        hostile, *neighbours = await asyncio.gather(
            batch.run(makes_many_folders), *(batch.run("print('next')") for _ in range(3))
        )
    assert (hostile.exit_code, hostile.stdout) == (0, "made folders\n"), hostile
    for neighbour in neighbours:
        assert (neighbour.exit_code, neighbour.stdout) == (0, "next\n"), neighbour
        # Not started in the container that could not be cleaned: in the next one.
        assert neighbour.run_id != hostile.run_id
    assert len({neighbour.run_id for neighbour in neighbours}) == 1  # one batch, not alone


def test_the_cleanup_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match=r"cleanup_seconds must be > 0 \(got 0"):
        BatchSandbox(cleanup_seconds=0)


async def test_a_python_task_meets_its_limits_as_a_new_interpreter_would(
    docker_client: docker.DockerClient,
) -> None:
    # A new python3 ignores SIGXFSZ and SIGPIPE: past the file size limit, a write fails.
    writes_past_the_file_limit = """
import os
try:
    with open("big", "wb") as handle:
        for _ in range(24):
            handle.write(bytes(1 << 20))
except OSError as error:
    print("refused:", error.strerror)
read, write = os.pipe()
os.close(read)
try:
    os.write(write, b"x")
except BrokenPipeError:
    print("broken pipe")
"""
    async with BatchSandbox(DISK, slots=1, docker_client=docker_client) as batch:
        in_batch = await batch.run(writes_past_the_file_limit)
    assert in_batch.stdout == "refused: File too large\nbroken pipe\n", in_batch
    assert _verdict(in_batch) == await _alone(docker_client, DISK, writes_past_the_file_limit)


async def test_a_task_gets_its_whole_process_limit_after_a_greedy_one(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(timeout=2.0)
    async with BatchSandbox(config, slots=2, docker_client=docker_client) as batch:
        rounds = [
            await asyncio.gather(
                batch.run(TAKES_EVERY_PROCESS),
                batch.run(TAKES_EVERY_PROCESS),
                batch.run(NEEDS_60_PROCESSES, timeout=10.0),
            )
            for _ in range(3)
        ]
    for greedy, other_greedy, needy in rounds:
        assert greedy.timed_out
        assert other_greedy.timed_out
        assert (needy.exit_code, needy.stdout) == (0, "forked 60\n"), needy


async def test_the_reaper_counts_a_killed_process_until_it_is_reaped(
    docker_client: docker.DockerClient,
) -> None:
    # A zombie no longer runs, but it holds its pid under the container's process limit.
    program = REAPER.read_text() + MAKES_A_ZOMBIE_AND_ASKS
    async with DockerSandbox(SandboxConfig(), docker_client=docker_client) as sandbox:
        result = await sandbox.run(program)
    assert result.stdout == "False True False\nFalse True\n", result
