"""AutoGen's CodeExecutorAgent on a sandcrew session: state kept across messages, figures as
files (real autogen-agentchat/core, real containers)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from autogen_agentchat.agents import CodeExecutorAgent
from autogen_agentchat.messages import TextMessage
from autogen_core import CancellationToken
from autogen_core.code_executor import CodeBlock

from sandcrew.integrations.autogen import SandcrewSessionExecutor
from sandcrew.sandbox import SandboxConfig, SessionLimits
from sandcrew.sandbox.images import DEFAULT_IMAGES
from tests.frameworks.test_autogen_executor import approve
from tests.sandbox.helpers import our_containers, shared_client

pytestmark = pytest.mark.docker

DATA_IMAGE = "sandcrew/python-data"
"""The image with pandas and matplotlib (`sandcrew images build --data`)."""


CELL_TIMEOUT = 3.0
"""The cell limit of the executor that times out on purpose."""


@pytest.fixture
async def executor(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[SandcrewSessionExecutor]:
    """A data-image session executor; ``@pytest.mark.parametrize`` may lower its cell limit."""
    config = SandboxConfig(images={**DEFAULT_IMAGES, "python": DATA_IMAGE})
    limit = getattr(request, "param", 60.0)
    started = SandcrewSessionExecutor(
        config, limits=SessionLimits(cell_timeout=limit), output_dir=tmp_path / "out"
    )
    async with started:
        yield started
    assert our_containers(shared_client()) == []


def message(code: str) -> TextMessage:
    return TextMessage(content=f"Next step:\n```python\n{code}\n```", source="coder")


async def test_variables_survive_between_two_agent_messages(
    executor: SandcrewSessionExecutor,
) -> None:
    agent = CodeExecutorAgent("runner", code_executor=executor, approval_func=approve)

    first = await agent.on_messages(
        [message("import pandas as pd\ntable = pd.DataFrame({'b': [1, 2, 3]})")],
        CancellationToken(),
    )
    second = await agent.on_messages(
        [message("print(int(table['b'].sum() * 7))")], CancellationToken()
    )

    assert isinstance(first.chat_message, TextMessage)
    assert isinstance(second.chat_message, TextMessage)
    assert second.chat_message.content == "42\n"


async def test_a_figure_comes_back_as_a_png_file(executor: SandcrewSessionExecutor) -> None:
    plot = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()"
    result = await executor.execute_code_blocks(
        [CodeBlock(code=plot, language="python")], CancellationToken()
    )

    assert result.exit_code == 0, result.output
    (figure,) = result.output_files
    assert figure.parent == executor.output_dir
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"image/png saved to {figure}" in result.output


async def test_an_error_stops_the_blocks_and_the_state_survives_it(
    executor: SandcrewSessionExecutor,
) -> None:
    blocks = [
        CodeBlock(code="x = 5", language="python"),
        CodeBlock(code="x / 0", language="python"),
        CodeBlock(code="print('never')", language="python"),
    ]
    failed = await executor.execute_code_blocks(blocks, CancellationToken())
    after = await executor.execute_code_blocks(
        [CodeBlock(code="x * 2", language="python")], CancellationToken()
    )

    assert failed.exit_code == 1
    assert "ZeroDivisionError" in failed.output
    assert "never" not in failed.output
    assert (after.exit_code, after.output) == (0, "10\n")


@pytest.mark.parametrize("executor", [CELL_TIMEOUT], indirect=True)
async def test_an_endless_block_is_interrupted_and_the_state_survives(
    executor: SandcrewSessionExecutor,
) -> None:
    await executor.execute_code_blocks(
        [CodeBlock(code="kept = 'yes'", language="python")], CancellationToken()
    )
    endless = await executor.execute_code_blocks(
        [CodeBlock(code="print('spinning', flush=True)\nwhile True:\n    pass", language="python")],
        CancellationToken(),
    )
    after = await executor.execute_code_blocks(
        [CodeBlock(code="print(kept)", language="python")], CancellationToken()
    )

    assert endless.exit_code == 124
    assert endless.output.startswith("spinning\n")
    assert f"Timeout (the cell ran longer than {CELL_TIMEOUT:g}s)" in endless.output
    assert after.output == "yes\n"


async def test_restart_gives_a_fresh_interpreter(executor: SandcrewSessionExecutor) -> None:
    await executor.execute_code_blocks(
        [CodeBlock(code="gone = 1", language="python")], CancellationToken()
    )
    await executor.restart()
    result = await executor.execute_code_blocks(
        [CodeBlock(code="gone", language="python")], CancellationToken()
    )
    assert result.exit_code == 1
    assert "NameError" in result.output
