"""JavaScript and bash on real containers: through `sandcrew run` and through the runner."""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from sandcrew.agents import TextMessage
from sandcrew.crew import RunnerAgent
from sandcrew.errors import ImageNotFoundError
from sandcrew.sandbox import DockerSandbox, SandboxConfig
from tests.process import run_cli

pytestmark = pytest.mark.docker

JAVASCRIPT = (
    "const fs = require('fs');\n"
    "const rows = fs.readFileSync('data.csv', 'utf8').trim().split('\\n').slice(1);\n"
    "fs.writeFileSync('out/count.json', JSON.stringify({rows: rows.length}));\n"
    "console.log(`rows=${rows.length}`);\n"
)
BASH = 'wc -l < data.csv\necho "done" > out/status.txt\necho "from $0"\n'


def test_sandcrew_run_runs_javascript_by_its_name(tmp_path: Path) -> None:
    program = tmp_path / "count.js"
    program.write_text(JAVASCRIPT)
    data = tmp_path / "data.csv"
    data.write_text("a\n1\n2\n")

    completed = run_cli("run", str(program), "--file", str(data), "--json")

    assert completed.returncode == 0, completed.stderr
    assert '"stdout": "rows=2\\n"' in completed.stdout
    assert '"image": "sandcrew/node:latest"' in completed.stdout
    assert '"name": "count.json"' in completed.stdout


def test_sandcrew_run_runs_a_bash_script_with_files(tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    data.write_text("a\n1\n2\n")

    completed = run_cli("run", "-", "-l", "bash", "--file", str(data), stdin=BASH)

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "3\nfrom /workspace/main.sh\n"
    assert "out/status.txt (5 bytes, text/plain): not saved (use --out DIR)" in completed.stderr


@pytest.mark.parametrize(
    ("fence", "code", "printed", "artifact"),
    [("js", JAVASCRIPT, "rows=2\n", "count.json"), ("bash", BASH, "3\n", "status.txt")],
)
async def test_the_runner_runs_javascript_and_bash(
    docker_client: docker.DockerClient, fence: str, code: str, printed: str, artifact: str
) -> None:
    async with DockerSandbox(docker_client=docker_client) as sandbox:
        runner = RunnerAgent(sandbox, files={"data.csv": b"a\n1\n2\n"})
        coder = TextMessage(content=f"```{fence}\n{code}```", sender="coder")
        reply = await runner.generate_reply([coder])

    [result] = runner.runs
    assert result.ok, result.stderr
    assert result.stdout.startswith(printed)
    assert reply.content.startswith("[RUNNER_RESULT]\nexit code 0\n")
    assert f"[files]\nout/{artifact} (" in reply.content


async def test_javascript_without_its_image_is_a_clear_error(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(images={"javascript": "sandcrew/no-such-node:latest"})
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        with pytest.raises(ImageNotFoundError, match="sandcrew/no-such-node:latest is missing"):
            await sandbox.run("console.log(1)", "javascript")
