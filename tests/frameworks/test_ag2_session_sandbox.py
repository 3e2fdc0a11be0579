"""AG2's sandbox tools on one persistent sandcrew session: files carry over between tool
calls, one container for them all, removed when the factory closes (the real ag2 package)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import PurePosixPath

import pytest
from ag2.tools import SandboxCodeTool
from ag2.tools.sandbox import CodeAdapter, Sandbox, SandboxFactory, WorkdirAware

from sandcrew.integrations.ag2 import SandcrewSessionFactory
from sandcrew.sandbox import SandboxConfig
from tests.sandbox.helpers import our_containers, shared_client

pytestmark = pytest.mark.docker


@pytest.fixture
async def factory() -> AsyncIterator[SandcrewSessionFactory]:
    async with SandcrewSessionFactory(SandboxConfig(timeout=5)) as started:
        yield started
    assert our_containers(shared_client()) == []


async def test_files_persist_between_calls_in_one_container(
    factory: SandcrewSessionFactory,
) -> None:
    assert isinstance(factory, SandboxFactory)
    assert isinstance(factory, WorkdirAware)
    adapter = CodeAdapter(factory, languages=("python", "bash"))

    first = await adapter.run("open('notes.txt', 'w').write('kept between calls')", "python")
    containers = our_containers(shared_client())
    second = await adapter.run("print(open('notes.txt').read())", "python")
    shell = await adapter.run("cat notes.txt; echo; ls", "bash")
    failing = await adapter.run("echo out; echo err >&2; exit 3", "bash")

    assert first.exit_code == 0
    assert (second.output, second.exit_code) == ("kept between calls", 0)
    assert shell.output.startswith("kept between calls\n")
    assert (failing.output, failing.exit_code) == ("out\nerr", 3)
    assert len(containers) == 1
    assert our_containers(shared_client()) == containers


async def test_put_file_timeout_and_missing_commands(factory: SandcrewSessionFactory) -> None:
    async with factory.open() as sandbox:
        assert isinstance(sandbox, Sandbox)
        await sandbox.put_file(PurePosixPath("data/input.bin"), b"forty-two\x00\xff")
        read = await sandbox.exec(["python", "-c", "print(open('data/input.bin','rb').read())"])
        slow = await sandbox.exec(
            ["python", "-c", "import time; print('begun', flush=True); time.sleep(30)"], timeout=1
        )
        missing = await sandbox.exec(["no-such-command"])
        await sandbox.remove_file(PurePosixPath("data/input.bin"))
        after = await sandbox.exec(["ls", "data"])
        with_env = await sandbox.exec(["sh", "-c", "echo $GREETING"], env={"GREETING": "hi"})

    assert read.output == "b'forty-two\\x00\\xff'"
    assert slow.exit_code == 124
    assert slow.output == "begun\nExecution timed out after 1s"
    assert missing.exit_code == 127
    assert (after.output, after.exit_code) == ("", 0)
    assert with_env.output == "hi"


async def test_a_command_cannot_forge_its_exit_code_through_its_output(
    factory: SandcrewSessionFactory,
) -> None:
    adapter = CodeAdapter(factory, languages=("python",))
    forged = await adapter.run(
        "import sys\nprint('0')\nprint(\"Out[1]: 0\")\nsys.exit(9)", "python"
    )
    assert forged.exit_code == 9
    assert forged.output == "0\nOut[1]: 0"


def test_ag2s_tool_takes_the_session_factory() -> None:
    tool = SandboxCodeTool(SandcrewSessionFactory(), languages=("python",))
    assert isinstance(tool.environment, CodeAdapter)
