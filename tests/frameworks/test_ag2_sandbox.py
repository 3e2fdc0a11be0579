"""AG2's CodeAdapter and sandbox contract on sandcrew containers (the real ag2 package)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import PurePosixPath

import pytest
from ag2 import Agent
from ag2.events import ToolCallEvent, ToolResultEvent
from ag2.testing import TestConfig
from ag2.tools import SandboxCodeTool
from ag2.tools.sandbox import CodeAdapter, Sandbox, SandboxFactory, WorkdirAware

from sandcrew.integrations.ag2 import SandcrewSandbox, SandcrewSandboxFactory
from sandcrew.sandbox import SandboxConfig
from tests.programs import FIBONACCI_PROGRAM

pytestmark = pytest.mark.docker


@pytest.fixture
async def factory() -> AsyncIterator[SandcrewSandboxFactory]:
    async with SandcrewSandboxFactory(SandboxConfig(timeout=5)) as started:
        yield started


def test_factory_and_sandbox_satisfy_ag2s_protocols() -> None:
    factory = SandcrewSandboxFactory()

    assert isinstance(factory, SandboxFactory)
    assert isinstance(factory, WorkdirAware)
    assert factory.workdir == PurePosixPath("/workspace")
    assert isinstance(SandcrewSandbox(factory.sandbox, factory.workdir), Sandbox)
    # AG2's own tool accepts it as a backend (it wraps it in a CodeAdapter).
    tool = SandboxCodeTool(factory, languages=("python", "bash"))
    assert isinstance(tool.environment, CodeAdapter)


async def test_code_adapter_runs_python_and_gets_output_and_exit_code(
    factory: SandcrewSandboxFactory,
) -> None:
    adapter = CodeAdapter(factory, languages=("python", "bash"))

    fibonacci = await adapter.run(FIBONACCI_PROGRAM, "python")
    failing = await adapter.run("echo out; echo err >&2; exit 3", "bash")

    assert (fibonacci.output, fibonacci.exit_code) == ("63245986", 0)
    assert (failing.output, failing.exit_code) == ("out\nerr", 3)


async def test_code_adapter_timeout_is_exit_code_124(factory: SandcrewSandboxFactory) -> None:
    adapter = CodeAdapter(factory, languages=("python",), timeout=1)

    result = await adapter.run("import time\nprint('begun', flush=True)\ntime.sleep(30)", "python")

    assert result.exit_code == 124
    assert result.output == "begun\nExecution timed out after 1s"


async def test_each_exec_is_a_new_container_and_put_file_works_within_the_sandbox(
    factory: SandcrewSandboxFactory,
) -> None:
    async with factory.open() as sandbox:
        await sandbox.put_file(PurePosixPath("data/input.txt"), b"forty-two\n\x00\xff")
        read = await sandbox.exec(["python", "-c", "print(open('data/input.txt','rb').read())"])
        scratch = await sandbox.exec(["sh", "-c", "echo left > scratch.txt; ls"])
        after = await sandbox.exec(["ls"])
        await sandbox.remove_file(PurePosixPath("data/input.txt"))
        removed = await sandbox.exec(["ls", "data"])
        with pytest.raises(ValueError, match="relative"):
            await sandbox.put_file(PurePosixPath("/etc/passwd"), b"x")
        with pytest.raises(ValueError, match="relative"):
            await sandbox.put_file(PurePosixPath("../escape"), b"x")
    async with factory.open() as another:
        fresh = await another.exec(["ls", "-A"])

    assert read == type(read)(output="b'forty-two\\n\\x00\\xff'", exit_code=0)
    # The sandbox delivers each program as main.sh in the working directory, next to
    # the empty out/ folder whose files come back as artifacts.
    ours = {"main.sh", "out"}
    assert set(scratch.output.split()) - ours == {"data", "scratch.txt"}
    assert set(after.output.split()) - ours == {"data"}  # scratch.txt went with its container
    assert removed.exit_code != 0  # `ls data`: the put file is gone
    assert set(fresh.output.split()) - ours == set()  # files stay within their sandbox


async def test_exec_passes_env_and_runs_in_the_workdir_without_network(
    factory: SandboxFactory,
) -> None:
    async with factory.open() as sandbox:
        result = await sandbox.exec(
            ["sh", "-c", 'echo "$GREETING from $(pwd)"; ls /sys/class/net'],
            env={"GREETING": "hello 'quoted' world"},
        )
        empty = await sandbox.exec([])

    assert result.output == "hello 'quoted' world from /workspace\nlo"
    assert result.exit_code == 0
    assert empty.exit_code == 2


async def test_an_ag2_agent_runs_its_code_tool_through_sandcrew(
    factory: SandcrewSandboxFactory,
) -> None:
    # AG2's own scripted model (ag2.testing) asks for two runs; the tool runs them here.
    calls = [
        ToolCallEvent("run_code", arguments=json.dumps({"code": code, "language": "python"}))
        for code in ("print(6 * 7)", "import time; time.sleep(30)")
    ]
    agent = Agent(
        "coder",
        config=TestConfig(calls, "The answer is 42."),
        tools=[SandboxCodeTool(CodeAdapter(factory, timeout=1))],
    )

    reply = await agent.ask("What is 6 * 7?")

    results = [
        event.result.parts[0].content
        for event in await reply.context.stream.history.get_events()
        if isinstance(event, ToolResultEvent)
    ]
    assert sorted(results) == ["42", "Execution timed out after 1s\n[exit code: 124]"]
    assert reply.body == "The answer is 42."
