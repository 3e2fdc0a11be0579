"""A five-cell data analysis in the python-data image: CSV in, pandas, a plot, HTML, a file out."""

from __future__ import annotations

import docker
import pytest

from sandcrew.sandbox import DockerSandbox, SandboxConfig, SessionLimits
from sandcrew.sandbox._images import PYTHON_DATA_IMAGE

pytestmark = pytest.mark.docker

CSV = b"city,year,rain\nOslo,2020,763\nOslo,2021,801\nLima,2020,16\nLima,2021,9\n"


async def test_a_five_cell_data_analysis(docker_client: docker.DockerClient) -> None:
    config = SandboxConfig(memory_bytes=512 * 1024 * 1024)
    limits = SessionLimits(cell_timeout=60)
    async with (
        DockerSandbox(config, docker_client=docker_client) as sandbox,
        sandbox.session(image=PYTHON_DATA_IMAGE, limits=limits) as session,
    ):
        await session.put_file("rain.csv", CSV)
        loaded = await session.run(
            "import pandas as pd\nframe = pd.read_csv('rain.csv')\nlen(frame)"
        )
        table = await session.run("totals = frame.groupby('city')['rain'].sum()\ntotals.to_frame()")
        plotted = await session.run(
            "import matplotlib.pyplot as plt\ntotals.plot(kind='bar', title='rain')\nplt.show()"
        )
        saved = await session.run("totals.to_csv('totals.csv')\nprint(totals.idxmax())")
        shown = await session.run("frame.describe().loc['mean', 'rain']")
        fetched = await session.get_file("totals.csv")

    assert [cell.ok for cell in (loaded, table, plotted, saved, shown)] == [True] * 5
    assert loaded.outputs[-1].data["text/plain"] == "4"
    html = table.outputs[-1].data["text/html"]
    assert isinstance(html, str)
    assert "<table" in html
    assert "1564" in html
    assert "Oslo" in table.outputs[-1].data["text/plain"]
    [figure] = [output for output in plotted.outputs if "image/png" in output.data]
    png = figure.data["image/png"]
    assert isinstance(png, bytes)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert saved.stdout == "Oslo\n"
    assert shown.outputs[-1].data["text/plain"] == "397.25"
    assert fetched.decode().splitlines() == ["city,rain", "Lima,25", "Oslo,1564"]
    assert len(png) > 1000
