"""Run uids are leased host-wide: two sandcrew processes never give two live containers one uid.

The leases are record locks on a file every process opens, so these tests run
real separate processes: one holds blocks while another asks for its own.
The ranges lie outside the default ``uid_range`` so that other sandcrew work on
the machine does not meet them.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from sandcrew.sandbox import BatchSandbox, DockerSandbox, SandboxConfig, SandboxError
from sandcrew.sandbox._uids import (
    LEASE_FILE_NAME,
    _lease_file_path,
    release_run_uid,
    take_run_ids,
    take_uid_block,
)

# Takes ``count`` uids ``times`` times from ``low``-``high``, prints the blocks as
# JSON (or the error), then holds them until it is killed.
HOLDER = """
import json, sys
from sandcrew.sandbox import SandboxConfig, SandboxError
from sandcrew.sandbox._uids import take_uid_block
low, high, count, times = (int(value) for value in sys.argv[1:5])
config = SandboxConfig(uid_range=(low, high))
blocks = []
try:
    for _ in range(times):
        blocks.append([take_uid_block(config, count), count])
except SandboxError as error:
    print(json.dumps({"blocks": blocks, "error": str(error)}), flush=True)
else:
    print(json.dumps({"blocks": blocks, "error": None}), flush=True)
sys.stdin.read()
"""


class Holder:
    """A separate process that leases blocks and keeps them while it lives."""

    def __init__(self, low: int, high: int, count: int, times: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(low), str(high), str(count), str(times)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        answer = json.loads(self.process.stdout.readline())
        self.blocks: list[tuple[int, int]] = [tuple(block) for block in answer["blocks"]]
        self.error: str | None = answer["error"]

    def end(self, how: signal.Signals = signal.SIGKILL) -> None:
        if self.process.poll() is None:
            self.process.send_signal(how)
        self.process.wait(timeout=30)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    started: list[Holder] = []
    yield started
    for holder in started:
        holder.end()


def _python(
    script: str, *, temporary_folder: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a new Python process (its temp directory ``temporary_folder``)."""
    env = dict(os.environ)
    if temporary_folder is not None:
        env["TMPDIR"] = str(temporary_folder)
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=env,
    )


def _overlap(first: tuple[int, int], second: tuple[int, int]) -> bool:
    return first[0] < second[0] + second[1] and second[0] < first[0] + first[1]


def test_blocks_of_two_processes_and_of_this_one_never_overlap(holders: list[Holder]) -> None:
    low, high = 71000, 71999
    holders.append(Holder(low, high, 20, 8))
    holders.append(Holder(low, high, 20, 8))
    config = SandboxConfig(uid_range=(low, high))
    mine = [(take_uid_block(config, 20), 20) for _ in range(3)]
    try:
        blocks = holders[0].blocks + holders[1].blocks + mine
        assert len(blocks) == 19
        assert all(low <= start and start + count - 1 <= high for start, count in blocks)
        for index, block in enumerate(blocks):
            assert not any(_overlap(block, other) for other in blocks[index + 1 :]), blocks
    finally:
        for start, _ in mine:
            release_run_uid(start)


def test_a_full_range_is_a_clear_error_until_its_holder_dies(holders: list[Holder]) -> None:
    low, high = 72000, 72099
    holder = Holder(low, high, 100, 1)
    holders.append(holder)
    assert holder.blocks == [(low, 100)]
    config = SandboxConfig(uid_range=(low, high))
    with pytest.raises(SandboxError, match="72000-72099 is in use by the sandbox containers"):
        take_run_ids(config)
    # A second holder is refused too: the first one's lock is the host's.
    late = Holder(low, high, 1, 1)
    holders.append(late)
    assert late.blocks == []
    assert late.error is not None
    # Killed, however hard, a process gives its leases back.
    holder.end()
    uid, gid = take_run_ids(config)
    try:
        assert low <= uid <= high
        assert gid == uid
    finally:
        release_run_uid(uid)


def test_a_released_block_can_be_leased_by_another_process(holders: list[Holder]) -> None:
    low, high = 72100, 72199
    config = SandboxConfig(uid_range=(low, high))
    start = take_uid_block(config, 100)
    refused = Holder(low, high, 100, 1)
    holders.append(refused)
    assert refused.blocks == []
    assert "72100-72199" in str(refused.error)
    release_run_uid(start)
    granted = Holder(low, high, 100, 1)
    holders.append(granted)
    assert granted.blocks == [(low, 100)]
    assert granted.error is None


OTHER_ACCOUNT = 65534  # nobody: a local user who is not the one running sandcrew


def _lock_as_other_account(start: int, count: int) -> tuple[int, int, int]:
    """Fork a child that, as another account, locks ``[start, start + count)`` of the lease file.

    It opens the file itself and locks the bytes without sandcrew, as any local
    program could. It tries once at once and once more on each byte written to
    the returned command pipe, answering ``held`` or ``refused`` on the answer
    pipe; a closed command pipe ends it. Returns (pid, commands, answers).
    """
    path = _lease_file_path()
    command_read, command_write = os.pipe()
    answer_read, answer_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(command_write)
            os.close(answer_read)
            os.setgroups([])
            os.setresgid(OTHER_ACCOUNT, OTHER_ACCOUNT, OTHER_ACCOUNT)
            os.setresuid(OTHER_ACCOUNT, OTHER_ACCOUNT, OTHER_ACCOUNT)
            lease_file = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
            while True:
                try:
                    fcntl.lockf(lease_file, fcntl.LOCK_EX | fcntl.LOCK_NB, count, start)
                    os.write(answer_write, b"held\n")
                except OSError:
                    os.write(answer_write, b"refused\n")
                if not os.read(command_read, 1):
                    break
            code = 0
        finally:
            os._exit(code)
    os.close(command_read)
    os.close(answer_write)
    return pid, command_write, answer_read


def test_another_accounts_locks_bind_sandcrew_and_sandcrews_bind_it() -> None:
    # Why the lease file is every user's: a uid is the host's, whoever runs sandcrew.
    low, high = 72500, 72599
    config = SandboxConfig(uid_range=(low, high))
    ours = take_uid_block(config, 100)  # makes the lease file if this host had none
    pid, commands, answers = _lock_as_other_account(low, 100)
    with os.fdopen(answers) as answered:
        try:
            assert answered.readline() == "refused\n"  # sandcrew's lease binds the account
            release_run_uid(ours)
            os.write(commands, b"x")
            assert answered.readline() == "held\n"
            # The account's lock binds sandcrew: a clear error, never a shared uid.
            with pytest.raises(SandboxError, match="72500-72599 is in use by the sandbox"):
                take_run_ids(config)
        finally:
            os.close(commands)
            _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    uid, _ = take_run_ids(config)  # the account's process ended: its locks went with it
    release_run_uid(uid)
    assert low <= uid <= high


def test_a_forked_child_does_not_take_its_parents_leases_for_its_own() -> None:
    script = textwrap.dedent(
        """
        import os, sys
        from sandcrew.sandbox import SandboxConfig, SandboxError
        from sandcrew.sandbox._uids import take_uid_block
        config = SandboxConfig(uid_range=(72200, 72299))
        parent = take_uid_block(config, 60)
        child = os.fork()
        if child == 0:
            try:
                start = take_uid_block(config, 60)
            except SandboxError:
                os._exit(3)
            overlap = start < parent + 60 and parent < start + 60
            os._exit(4 if overlap else 0)
        print(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))
        """
    )
    done = _python(script)
    # 60 + 60 uids cannot fit in 100 without overlapping: the child must be refused.
    assert done.stdout.strip() == "3", done.stderr


def test_an_unusable_lease_file_is_a_warning_and_leases_hold_within_the_process(
    tmp_path: Path,
) -> None:
    (tmp_path / LEASE_FILE_NAME).symlink_to(tmp_path / "elsewhere")
    script = textwrap.dedent(
        """
        import logging
        from sandcrew.sandbox import SandboxConfig, SandboxError
        from sandcrew.sandbox._uids import take_uid_block
        logging.basicConfig(format="%(levelname)s %(message)s")
        config = SandboxConfig(uid_range=(72300, 72399))
        print(take_uid_block(config, 100))
        try:
            take_uid_block(config, 1)
        except SandboxError:
            print("refused")
        """
    )
    done = _python(script, temporary_folder=tmp_path)
    assert done.stdout.split() == ["72300", "refused"]
    assert "WARNING cannot open" in done.stderr
    assert "within this process only" in done.stderr
    assert not (tmp_path / "elsewhere").exists()


def test_the_lease_file_is_made_for_every_user(tmp_path: Path) -> None:
    script = (
        "from sandcrew.sandbox import SandboxConfig\n"
        "from sandcrew.sandbox._uids import take_run_ids\n"
        "print(take_run_ids(SandboxConfig(uid_range=(72400, 72499)))[0])\n"
    )
    _python(script, temporary_folder=tmp_path)
    assert (tmp_path / LEASE_FILE_NAME).stat().st_mode & 0o777 == 0o666


@pytest.mark.docker
async def test_batch_and_single_runs_use_only_uids_no_other_process_holds(
    docker_client: docker.DockerClient, holders: list[Holder]
) -> None:
    # Another process holds the first half of a 2,048-uid range: a batch
    # container (1,024 uids) can only have the other half, and while it lives a
    # single run has no uid at all.
    low = 73000
    holder = Holder(low, low + 1023, 1024, 1)
    holders.append(holder)
    assert holder.blocks == [(low, 1024)]
    config = SandboxConfig(uid_range=(low, low + 2047), timeout=10.0)
    program = "import os; print(os.getuid(), os.getgid())"
    async with DockerSandbox(config, docker_client=docker_client) as alone:
        async with BatchSandbox(config, slots=2, docker_client=docker_client) as batch:
            results = [await batch.run(program) for _ in range(3)]
            with pytest.raises(SandboxError, match="is in use by the sandbox containers"):
                await alone.run(program)
        single = await alone.run(program)
    assert all(result.exit_code == 0 for result in [*results, single]), [*results, single]
    assert [result.stdout.split() for result in results] == [
        [str(uid), str(uid)] for uid in (low + 1024, low + 1025, low + 1026)
    ]
    uid = int(single.stdout.split()[0])
    assert low + 1024 <= uid <= low + 2047
