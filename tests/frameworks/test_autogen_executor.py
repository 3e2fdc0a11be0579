"""AutoGen's own CodeExecutorAgent runs code through sandcrew (real autogen-agentchat/core)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from autogen_agentchat.agents import ApprovalRequest, ApprovalResponse, CodeExecutorAgent
from autogen_agentchat.messages import TextMessage
from autogen_core import CancellationToken
from autogen_core.code_executor import CodeBlock, CodeExecutor

from sandcrew.integrations.autogen import SandcrewCodeExecutor
from sandcrew.sandbox import SandboxConfig
from tests.programs import FIBONACCI_PROGRAM

pytestmark = pytest.mark.docker


def approve(request: ApprovalRequest) -> ApprovalResponse:
    # The sandbox is the safety here; AutoGen warns when no approval step is configured.
    return ApprovalResponse(approved=True, reason="runs in a throwaway sandcrew container")


@pytest.fixture
async def executor() -> AsyncIterator[SandcrewCodeExecutor]:
    async with SandcrewCodeExecutor(SandboxConfig(timeout=2)) as started:
        yield started


async def test_code_executor_agent_runs_a_block_and_answers_with_its_output(
    executor: SandcrewCodeExecutor,
) -> None:
    agent = CodeExecutorAgent("runner", code_executor=executor, approval_func=approve)
    message = TextMessage(content=f"Here it is:\n```python\n{FIBONACCI_PROGRAM}```", source="coder")

    response = await agent.on_messages([message], CancellationToken())

    assert isinstance(response.chat_message, TextMessage)
    assert response.chat_message.content == "63245986\n"


async def test_code_executor_agent_reports_the_exit_code_of_a_failing_block(
    executor: SandcrewCodeExecutor,
) -> None:
    agent = CodeExecutorAgent("runner", code_executor=executor, approval_func=approve)
    message = TextMessage(content="```sh\necho oops >&2\nexit 3\n```", source="coder")

    response = await agent.on_messages([message], CancellationToken())

    assert isinstance(response.chat_message, TextMessage)
    assert response.chat_message.content == (
        "The script ran, then exited with an error (POSIX exit code: 3)\nIts output was:\noops\n"
    )


async def test_blocks_run_in_order_and_stop_at_the_first_failure(
    executor: SandcrewCodeExecutor,
) -> None:
    blocks = [
        CodeBlock(code="print('one')", language="python"),
        CodeBlock(code="import sys; print('two'); sys.exit(5)", language="python"),
        CodeBlock(code="print('never')", language="python"),
    ]

    result = await executor.execute_code_blocks(blocks, CancellationToken())

    assert (result.exit_code, result.output) == (5, "one\ntwo\n")


async def test_a_timeout_is_exit_code_124_and_ends_with_timeout(
    executor: SandcrewCodeExecutor,
) -> None:
    block = CodeBlock(code="import time\nprint('begun', flush=True)\ntime.sleep(30)", language="py")

    result = await executor.execute_code_blocks([block], CancellationToken())

    assert result.exit_code == 124
    assert result.output.startswith("begun\n")
    assert "Timeout" in result.output


async def test_an_unsupported_language_is_refused_like_autogen_does(
    executor: SandcrewCodeExecutor,
) -> None:
    result = await executor.execute_code_blocks(
        [CodeBlock(code="puts 1", language="ruby")], CancellationToken()
    )

    assert result.exit_code == 1
    assert "Unsupported language 'ruby'" in result.output


async def test_cancelling_the_token_cancels_the_run(executor: SandcrewCodeExecutor) -> None:
    token = CancellationToken()
    block = CodeBlock(code="import time; time.sleep(30)", language="python")
    running = asyncio.ensure_future(executor.execute_code_blocks([block], token))
    await asyncio.sleep(0.5)
    token.cancel()

    with pytest.raises(asyncio.CancelledError):
        await running


def test_executor_round_trips_through_autogen_component_config() -> None:
    original = SandcrewCodeExecutor(SandboxConfig(timeout=7, memory_bytes=128 * 1024 * 1024))

    loaded = CodeExecutor.load_component(original.dump_component())

    assert isinstance(loaded, SandcrewCodeExecutor)
    assert loaded.sandbox.config == original.sandbox.config
