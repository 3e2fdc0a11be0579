"""`sandcrew run`: real process, real containers, exit codes and readable errors."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from sandcrew.sandbox.images import DEFAULT_IMAGES
from tests.process import run_cli
from tests.programs import FIBONACCI_PROGRAM
from tests.programs_files import CSV, CSV_SUMMARY, CSV_TO_PNG_PROGRAM, png_size

# `sandcrew run` starts real containers (and run_cli checks the engine for leftovers).
pytestmark = pytest.mark.docker


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "fib.py"
    path.write_text(FIBONACCI_PROGRAM)
    return path


def test_run_prints_the_39th_fibonacci_number(program: Path) -> None:
    completed = run_cli("run", str(program))

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "63245986\n"
    assert "exit 0" in completed.stderr
    assert "sandcrew/python:latest" in completed.stderr


def test_run_json_reports_the_whole_result(program: Path) -> None:
    completed = run_cli("run", str(program), "--json")

    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["stdout"] == "63245986\n"
    assert result["exit_code"] == 0
    assert result["timed_out"] is False
    assert result["oom_killed"] is False
    assert result["language"] == "python"
    assert result["duration"] > 0


def test_run_reads_stdin_and_bash_by_name(tmp_path: Path) -> None:
    assert run_cli("run", "-", stdin="print(6 * 7)").stdout == "42\n"
    script = tmp_path / "hello.sh"
    script.write_text('echo "hello from $(basename $SHELL 2>/dev/null || echo bash)"\n')
    completed = run_cli("run", str(script))
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("hello from")


def test_run_exits_with_the_programs_code_and_keeps_stderr() -> None:
    completed = run_cli("run", "-", stdin="import sys\nprint('oops', file=sys.stderr)\nsys.exit(3)")

    assert completed.returncode == 3
    assert "oops" in completed.stderr
    assert "exit 3" in completed.stderr


def test_run_timeout_exits_124() -> None:
    completed = run_cli("run", "-", "--timeout", "1", stdin="while True:\n    pass\n")

    assert completed.returncode == 124
    assert "timed out" in completed.stderr


def test_run_out_of_memory_exits_137() -> None:
    bomb = "blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))\n"
    completed = run_cli("run", "-", "--memory", "64m", stdin=bomb)

    assert completed.returncode == 137
    assert "out of memory" in completed.stderr


def test_network_is_opt_in() -> None:
    probe = "import os\nprint(sorted(os.listdir('/sys/class/net')))"
    isolated = run_cli("run", "-", stdin=probe)
    connected = run_cli("run", "-", "--network", stdin=probe)

    assert isolated.stdout.strip() == "['lo']"
    assert connected.returncode == 0, connected.stderr
    assert "eth0" in connected.stdout


@pytest.mark.parametrize(
    ("args", "stdin", "expected"),
    [
        (["run", "-"], "", "empty"),
        (["run", "-", "--language", "ruby"], "puts 1", "python"),
        (["run", "-", "--memory", "lots"], "print(1)", "'--memory': must look like 256m"),
        (["run", "-", "--timeout", "-1"], "print(1)", "timeout must be > 0"),
        (
            ["run", "-", "--run-timeout", "0.001"],
            "print(1)",
            "timeout must be at least 0.1 seconds, the least in which a program can start",
        ),
        (["run", "/nonexistent/program.py"], None, "no such file: /nonexistent/program.py"),
        (
            ["run", "-", "--image", "sandcrew/does-not-exist:1"],
            "print(1)",
            "sandcrew does not build it: pull it (`docker pull sandcrew/does-not-exist:1`)",
        ),
    ],
    ids=[
        "empty",
        "language",
        "memory",
        "timeout",
        "timeout-too-small",
        "missing-file",
        "missing-image",
    ],
)
def test_usage_errors_exit_125_with_one_clear_line(
    args: list[str], stdin: str | None, expected: str
) -> None:
    completed = run_cli(*args, stdin=stdin)

    assert completed.returncode == 125, completed.stderr
    assert expected in completed.stderr
    assert completed.stderr.count("\n") == 1, completed.stderr


def test_oversized_code_names_the_limit() -> None:
    completed = run_cli("run", "-", stdin="x = 1\n" * 200_000)

    assert completed.returncode == 125
    assert "at most 1048576 bytes" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_unreachable_docker_names_docker_host_and_the_socket() -> None:
    completed = run_cli(
        "run", "-", stdin="print(1)", env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    )

    assert completed.returncode == 125
    assert "DOCKER_HOST" in completed.stderr
    assert "/nonexistent/docker.sock" in completed.stderr
    assert "Traceback" not in completed.stderr
    assert len(completed.stderr.strip().splitlines()) <= 2


def test_program_that_is_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    program = tmp_path / "latin1.py"
    program.write_bytes(b"print('caf\xe9')\n")

    completed = run_cli("run", str(program))

    assert completed.returncode == 125
    assert "is not UTF-8 text" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_run_takes_a_csv_and_saves_the_png_it_draws(tmp_path: Path) -> None:
    program = tmp_path / "plot.py"
    program.write_text(CSV_TO_PNG_PROGRAM)
    data = tmp_path / "data.csv"
    data.write_text(CSV)
    saved = tmp_path / "results"

    completed = run_cli("run", str(program), "--file", str(data), "--out", str(saved))

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == CSV_SUMMARY
    plot = saved / "plot.png"
    assert png_size(plot.read_bytes()) == (120, 80)
    assert f"out/plot.png ({plot.stat().st_size} bytes, image/png): saved to {plot}" in (
        completed.stderr
    )


def test_run_json_lists_artifacts_with_small_ones_inline(tmp_path: Path) -> None:
    folder = tmp_path / "inputs"
    (folder / "nested").mkdir(parents=True)
    (folder / "nested" / "data.csv").write_text(CSV)
    program = "import shutil\nshutil.copy('nested/data.csv', 'out/copy.csv')\n"

    completed = run_cli("run", "-", "--file", str(folder), "--json", stdin=program)

    assert completed.returncode == 0, completed.stderr
    [artifact] = json.loads(completed.stdout)["artifacts"]
    assert artifact["name"] == "copy.csv"
    assert artifact["media_type"] == "text/csv"
    assert artifact["path"] is None
    assert base64.b64decode(artifact["data_base64"]).decode() == CSV


def test_run_refuses_a_missing_input_file_in_one_line(tmp_path: Path) -> None:
    completed = run_cli("run", "-", "--file", str(tmp_path / "missing.csv"), stdin="print(1)")

    assert completed.returncode == 125  # sandcrew itself refused (as docker run)
    # (the error printer wraps long lines at the terminal width)
    assert completed.stderr.startswith("error: input file not found:")
    assert "missing.csv" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_an_image_sandcrew_does_not_build_is_not_sent_to_images_build(tmp_path: Path) -> None:
    missing = "sandcrew-test/nosuch:latest"
    ran = run_cli("run", "-", "--image", missing, stdin="print(1)")
    config = tmp_path / "config.toml"
    config.write_text(f'[sandbox.images]\npython = "{missing}"\n', encoding="utf-8")
    checked = run_cli("suite", "run", "basics", "-s", "canonical", "--config", str(config))

    advice = (
        f"Sandbox image {missing} is missing; sandcrew does not build it: pull it (`docker pull "
        f"{missing}`) or build it yourself, or use one of sandcrew's images (`sandcrew images "
        "list` shows them)"
    )
    assert (ran.returncode, ran.stderr) == (125, f"error: {advice}\n")
    # Before anything runs, a suite says the same (a setting to fix: exit 2).
    assert (checked.returncode, checked.stderr) == (2, f"error: {advice}\n")


def test_a_program_on_an_image_without_its_interpreter_says_so(tmp_path: Path) -> None:
    program = tmp_path / "hello.js"
    program.write_text("console.log('hello')\n", encoding="utf-8")

    completed = run_cli("run", str(program), "--image", DEFAULT_IMAGES["python"])

    assert completed.returncode == 125, completed.stderr
    assert completed.stderr.startswith(
        "sandcrew: cannot start the program: this image has no javascript interpreter (node is "
        "not installed in it); run javascript programs in an image that has one\n"
    ), completed.stderr
