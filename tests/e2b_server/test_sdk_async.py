"""The unmodified E2B SDK's async client against a `sandcrew e2b` the test started."""

from __future__ import annotations

import asyncio
import base64

import pytest
from e2b import CommandExitException, FileNotFoundException, TimeoutException
from e2b_code_interpreter import AsyncSandbox, OutputMessage, Result

from tests.e2b_server.helpers import E2bServer

pytestmark = pytest.mark.docker


async def test_cells_live_output_results_and_state(e2b_env: E2bServer) -> None:
    sandbox = await AsyncSandbox.create()
    try:
        lines: list[OutputMessage] = []
        results: list[Result] = []

        async def on_stdout(message: OutputMessage) -> None:
            lines.append(message)

        await sandbox.run_code("n = 6")
        execution = await sandbox.run_code(
            "import matplotlib.pyplot as plt\nprint('drawing')\n"
            "plt.bar([1], [n])\nplt.show()\nn * 7",
            on_stdout=on_stdout,
            on_result=results.append,
        )
        assert [line.line for line in lines] == ["drawing\n"]
        assert lines[0].timestamp > 0
        assert execution.text == "42"
        pngs = [result.png for result in results if result.png]
        assert base64.b64decode(pngs[0]).startswith(b"\x89PNG")
        context = await sandbox.create_code_context()
        assert (await sandbox.run_code("n", context=context)).error is not None
    finally:
        await sandbox.kill()


async def test_files_and_commands(e2b_env: E2bServer) -> None:
    sandbox = await AsyncSandbox.create()
    try:
        await sandbox.files.write("/home/user/in.txt", "async")
        result = await sandbox.commands.run("wc -c < in.txt")
        assert result.stdout.strip() == "5"
        with pytest.raises(CommandExitException) as failed:
            await sandbox.commands.run("false")
        assert failed.value.exit_code == 1
        with pytest.raises(FileNotFoundException):
            await sandbox.files.read("nope.txt")
        assert await sandbox.files.exists("in.txt")
    finally:
        await sandbox.kill()


async def test_timeout_connect_and_kill(e2b_env: E2bServer) -> None:
    sandbox = await AsyncSandbox.create(timeout=60)
    await sandbox.run_code("kept = 1")
    with pytest.raises(TimeoutException):
        await sandbox.run_code("import time\nwhile True: time.sleep(0.1)", timeout=2)
    assert (await sandbox.run_code("kept + 1")).text == "2"
    await sandbox.set_timeout(90)
    again = await AsyncSandbox.connect(sandbox.sandbox_id)
    assert (await again.run_code("kept")).text == "1"
    assert await sandbox.kill() is True
    assert await AsyncSandbox.kill(sandbox.sandbox_id) is False


async def test_two_sandboxes_run_at_once(e2b_env: E2bServer) -> None:
    first, second = await asyncio.gather(AsyncSandbox.create(), AsyncSandbox.create())
    try:
        await asyncio.gather(first.run_code("who = 'first'"), second.run_code("who = 'second'"))
        assert (await first.run_code("who")).text == "'first'"
        assert (await second.run_code("who")).text == "'second'"
    finally:
        await asyncio.gather(first.kill(), second.kill())
