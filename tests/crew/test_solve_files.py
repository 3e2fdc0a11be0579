"""`sandcrew solve --file --out`: the crew sees the CSV, the run draws a PNG that is saved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandcrew.testing import ScriptedModelServer, Turn
from tests.crew.conftest import coder_turn, review_turn, run_cli
from tests.programs_files import (
    CSV,
    CSV_SUMMARY,
    CSV_TO_PNG_PROGRAM,
    DATA_IMAGE,
    PANDAS_PLOT_PROGRAM,
    PANDAS_SUMMARY,
    png_size,
)

pytestmark = pytest.mark.docker

TASK = "Summarise data.csv and plot the temperatures."


def test_solve_reads_a_csv_and_saves_the_plot(
    model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    model_server.add(
        coder_turn(f"```python\n{CSV_TO_PNG_PROGRAM}```"),
        review_turn(),
        Turn(
            agent="admin",
            contains="[RUNNER_RESULT]",
            content="Mean 15.25, max 24; the plot is out/plot.png.\n[COMPLETE]",
        ),
    )
    data = tmp_path / "data.csv"
    data.write_text(CSV)
    saved = tmp_path / "results"
    transcript = tmp_path / "chat.jsonl"

    completed = run_cli(
        "solve",
        TASK,
        "--base-url",
        model_server.base_url,
        "--model",
        "scripted",
        "--file",
        str(data),
        "--out",
        str(saved),
        "--json",
        "--transcript",
        str(transcript),
    )

    assert completed.returncode == 0, completed.stderr
    coder_request = next(request for request in model_server.requests if request.agent == "coder")
    asked = json.dumps(coder_request.messages)
    assert f"- data.csv ({len(CSV)} bytes)" in asked
    assert "city,temp" in asked
    assert "out/" in asked

    plot = saved / "plot.png"
    assert png_size(plot.read_bytes()) == (120, 80)
    [run] = json.loads(completed.stdout)["runs"]
    assert run["stdout"] == CSV_SUMMARY
    assert run["artifacts"] == [
        {
            "name": "plot.png",
            "size": plot.stat().st_size,
            "media_type": "image/png",
            "path": str(plot),
        }
    ]
    records = [json.loads(line) for line in transcript.read_text().splitlines()]
    [run_record] = [record for record in records if record["event"] == "run"]
    assert f"out/plot.png ({plot.stat().st_size} bytes, image/png)" in run_record["content"]
    assert run_record["data"]["artifacts"][0]["name"] == "plot.png"


def test_solve_with_the_data_image_prints_the_pandas_summary_and_saves_the_figure(
    model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    model_server.add(
        coder_turn(f"```python\n{PANDAS_PLOT_PROGRAM}```"),
        review_turn(),
        Turn(
            agent="admin",
            contains="out/figure-1.png",
            content="The mean is 15.25; the chart is out/figure-1.png.\n[COMPLETE]",
        ),
    )
    data = tmp_path / "data.csv"
    data.write_text(CSV)
    saved = tmp_path / "results"

    completed = run_cli(
        "solve",
        TASK,
        "--base-url",
        model_server.base_url,
        "--model",
        "scripted",
        "--image",
        DATA_IMAGE,
        "--run-timeout",
        "30",
        "--file",
        str(data),
        "--out",
        str(saved),
    )

    assert completed.returncode == 0, completed.stderr
    assert PANDAS_SUMMARY.splitlines()[1] in completed.stdout
    assert png_size((saved / "figure-1.png").read_bytes()) == (640, 480)
    assert f"saved to {saved / 'figure-1.png'}" in completed.stdout.replace("\n", "")
