"""`sandcrew solve --file --out`: the crew sees the CSV, the run draws a PNG that is saved."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from sandcrew.sandbox._images import IMAGE_SPECS
from sandcrew.testing import ScriptedModelServer, Turn
from tests.cli.test_out_folder import new_folder
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
    scripted_model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    scripted_model_server.add(
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
        scripted_model_server.base_url,
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
    coder_request = next(
        request for request in scripted_model_server.requests if request.agent == "coder"
    )
    asked = json.dumps(coder_request.messages)
    assert f"- data.csv ({len(CSV)} bytes)" in asked
    assert "city,temp" in asked
    assert "out/" in asked

    plot = saved / "plot.png"
    assert png_size(plot.read_bytes()) == (120, 80)
    [run] = json.loads(completed.stdout)["runs"]
    assert run["stdout"] == CSV_SUMMARY
    # As `run --json` prints a run: the file's bytes as base64 (it is under INLINE_BYTES).
    assert run["artifacts"] == [
        {
            "name": "plot.png",
            "size": plot.stat().st_size,
            "media_type": "image/png",
            "path": str(plot),
            "data_base64": base64.b64encode(plot.read_bytes()).decode(),
        }
    ]
    records = [json.loads(line) for line in transcript.read_text().splitlines()]
    [run_record] = [record for record in records if record["event"] == "run"]
    assert f"out/plot.png ({plot.stat().st_size} bytes, image/png)" in run_record["content"]
    assert run_record["run"]["artifacts"][0]["name"] == "plot.png"


def test_solve_with_the_data_image_prints_the_pandas_summary_and_saves_the_figure(
    scripted_model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    scripted_model_server.add(
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
        scripted_model_server.base_url,
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


@pytest.fixture(params=["python-data", "python"])
def labelled_image(
    request: pytest.FixtureRequest, docker_client: docker.DockerClient
) -> Iterator[tuple[str, str]]:
    """A sandbox image with the labels its build now sets, under a tag of its own.

    The shared images were built before the label existed; this adds only the label.
    """
    [spec] = [spec for spec in IMAGE_SPECS if spec.name == request.param]
    tag = f"sandcrew-test/{spec.name}-labelled:{uuid.uuid4().hex[:12]}"
    docker_client.images.build(
        fileobj=io.BytesIO(f"FROM {spec.tag}\n".encode()), tag=tag, labels=spec.labels, rm=True
    )
    try:
        yield tag, spec.labels["sandcrew.packages"]
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(tag)


def test_the_coder_is_told_which_packages_the_image_has(
    scripted_model_server: ScriptedModelServer, labelled_image: tuple[str, str]
) -> None:
    image, packages = labelled_image
    program = "import importlib.util\nprint(importlib.util.find_spec('pandas') is not None)\n"
    scripted_model_server.add(
        coder_turn(f"```python\n{program}```"),
        review_turn(),
        Turn(agent="admin", contains="[RUNNER_RESULT]", content="Checked.\n[COMPLETE]"),
    )

    completed = run_cli(
        "solve", "Is pandas there?", "--base-url", scripted_model_server.base_url,
        "--model", "scripted", "--image", image, "--quiet", "--json",
    )  # fmt: skip

    assert completed.returncode == 0, completed.stderr
    [coder_request] = scripted_model_server.requests_for("coder")
    system = coder_request.messages[0]["content"]
    [run] = json.loads(completed.stdout)["runs"]
    # Both images carry IPython (sessions run on it) and pip; only python-data has pandas.
    expected = {
        "python-data": (
            "ipython 8.31.0, pip 24.3.1, numpy 1.26.4, pandas 2.2.3, matplotlib 3.9.2, scipy 1.14.1"
        ),
        "python": "ipython 8.31.0, pip 24.3.1",
    }
    assert packages == expected[image.split("/")[1].rsplit("-labelled", 1)[0]]
    assert f"these packages (with their dependencies): {packages};" in system
    assert run["stdout"] == ("True\n" if "pandas" in packages else "False\n")


def test_solve_saves_by_the_same_rules(
    scripted_model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine\n")
    (folder / "sub").symlink_to(tmp_path)
    code = (
        "import os\nos.makedirs('out/sub', exist_ok=True)\n"
        "open('out/keep.txt', 'w').write('theirs')\nopen('out/sub/x', 'w').write('x')\n"
        "open('out/.git', 'w').write('gitdir: /elsewhere')\nprint('done')\n"
    )
    scripted_model_server.add(
        coder_turn(f"```python\n{code}```"),
        review_turn(),
        Turn(agent="admin", contains="[RUNNER_RESULT]", content="Done.\n[COMPLETE]"),
    )

    completed = run_cli(
        "solve", "Write files.", "--base-url", scripted_model_server.base_url,
        "--model", "scripted", "--out", str(folder),
    )  # fmt: skip

    assert completed.returncode == 0, completed.stderr
    assert (folder / "keep.txt").read_text() == "mine\n"
    assert not (tmp_path / "x").exists()
    made = new_folder(folder)
    assert (made / "keep.txt").read_text() == "theirs"
    assert (made / "sub" / "x").read_text() == "x"
    assert f"saved in the new folder {made}" in completed.stdout.replace("\n", "")
    assert "'.git' is a version-control folder" in completed.stdout
    assert not (made / ".git").exists()
