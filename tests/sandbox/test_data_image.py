"""The python-data image: pandas reads the CSV, matplotlib's figures come back as PNGs."""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from sandcrew.sandbox import DockerSandbox, SandboxConfig
from tests.process import run_cli
from tests.programs_files import CSV, DATA_IMAGE, PANDAS_PLOT_PROGRAM, PANDAS_SUMMARY, png_size

pytestmark = pytest.mark.docker

DATA = SandboxConfig(timeout=30.0, images={"python": DATA_IMAGE})


async def test_pandas_summary_and_the_shown_figure_come_back(
    docker_client: docker.DockerClient,
) -> None:
    async with DockerSandbox(DATA, docker_client=docker_client) as sandbox:
        result = await sandbox.run(PANDAS_PLOT_PROGRAM, files={"data.csv": CSV.encode()})

    assert result.ok, result.stderr
    assert result.stdout == PANDAS_SUMMARY
    assert result.stderr == ""
    [figure] = result.artifacts
    assert (figure.name, figure.media_type) == ("figure-1.png", "image/png")
    assert png_size(figure.data) == (640, 480)
    assert "out/figure-1.png (" in result.to_runner_message()


async def test_open_figures_are_saved_unless_the_program_saved_them(
    docker_client: docker.DockerClient,
) -> None:
    program = (
        "import matplotlib.pyplot as plt\n"
        "plt.figure(); plt.plot([1, 2, 3])\n"
        "plt.savefig('out/figure-1.png', dpi=50)\n"
        "plt.figure(); plt.plot([3, 2, 1])\n"
    )
    async with DockerSandbox(DATA, docker_client=docker_client) as sandbox:
        result = await sandbox.run(program)

    assert result.ok, result.stderr
    sizes = {item.name: png_size(item.data) for item in result.artifacts}
    assert sizes == {"figure-1.png": (320, 240), "figure-2.png": (640, 480)}


def test_sandcrew_run_with_the_data_image_saves_the_plot(tmp_path: Path) -> None:
    program = tmp_path / "plot.py"
    program.write_text(PANDAS_PLOT_PROGRAM)
    data = tmp_path / "data.csv"
    data.write_text(CSV)
    saved = tmp_path / "results"

    completed = run_cli(
        "run", str(program), "--file", str(data), "--out", str(saved), "--image", DATA_IMAGE
    )

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == PANDAS_SUMMARY
    assert png_size((saved / "figure-1.png").read_bytes()) == (640, 480)
    assert f"saved to {saved / 'figure-1.png'}" in completed.stderr
