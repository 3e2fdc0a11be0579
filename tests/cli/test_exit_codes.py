"""Every row of the exit-code table (sandcrew/cli/_exit_codes.py), through the real CLI.

solve / suite: 0 ok, 1 not solved or failures, 2 usage or configuration, 3 infrastructure,
130 interrupted. run: the program's own code, 124 timed out, 137 out of memory, 125
sandcrew failed. Every error is one line on stderr (a JSON object with --json).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandcrew.agents import StopReason
from sandcrew.agents._tokens import estimate_prompt_tokens
from sandcrew.crew import CrewResult
from sandcrew.testing import ScriptedModelServer, Turn
from sandcrew.transcript import HeaderEvent, ResultEvent, read_transcript
from tests.crew.conftest import FIBONACCI_TASK, coder_turn, happy_path_turns
from tests.process import run_cli
from tests.sandbox.helpers import our_containers, shared_client

pytestmark = pytest.mark.docker

NO_DOCKER = {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}
NO_MODEL = {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""}


def solve(
    server: ScriptedModelServer, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "solve", FIBONACCI_TASK, "--base-url", server.base_url, "--model", "scripted", *args,
        env=env,
    )  # fmt: skip


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: "), stderr
    return lines[0]


# solve ----------------------------------------------------------------------------------


def test_solve_solved_exits_0(scripted_model_server: ScriptedModelServer) -> None:
    scripted_model_server.add(*happy_path_turns())
    assert solve(scripted_model_server, "-q").returncode == 0


def test_solve_not_solved_exits_1(scripted_model_server: ScriptedModelServer) -> None:
    scripted_model_server.add(*happy_path_turns()[:2])
    completed = solve(scripted_model_server, "--max-rounds", "2")
    assert completed.returncode == 1, completed.stderr
    assert "not solved (max_rounds)" in completed.stderr


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["--max-rounds", "0"], {}, "max_rounds (command line)"),
        (["--run-timeout", "inf"], {}, "timeout must be at most 86400 seconds (got inf)"),
        (["--time-budget", "1e10"], {}, "time_budget (command line)"),
        (["--memory", "99999g"], {}, "memory_bytes must be at most 1 TiB"),
        (["--model", "no-such-model"], {}, "does not serve no-such-model (it serves scripted)"),
        (["--image", "sandcrew/does-not-exist:1"], {}, "sandcrew/does-not-exist:1 is missing"),
        (["--mode", "chaos"], {}, "'chaos' is not one of 'workflow', 'admin', 'workflow+admin'"),
        (["--max-tokens", "5"], {}, "No such option: --max-tokens"),
    ],
    ids=["bad-rounds", "inf-run-timeout", "huge-time-budget", "huge-memory", "unknown-model",
         "missing-image", "bad-mode", "old-option"],
)  # fmt: skip
def test_solve_usage_and_configuration_errors_exit_2(
    scripted_model_server: ScriptedModelServer, args: list[str], env: dict[str, str], expected: str
) -> None:
    completed = solve(scripted_model_server, *args, env=env)
    assert completed.returncode == 2, completed.stderr
    assert expected in one_error_line(completed.stderr)
    assert [request.method for request in scripted_model_server.requests] in ([], ["GET"])


def test_solve_bad_base_url_and_no_model_exit_2() -> None:
    bad_url = run_cli("solve", FIBONACCI_TASK, "--base-url", "localhost:8080")
    no_model = run_cli("solve", FIBONACCI_TASK, env=NO_MODEL)
    empty_task = run_cli("solve", "  ", "--base-url", "http://127.0.0.1:9/v1")

    assert bad_url.returncode == 2
    assert "base_url must be an http:// or https:// URL" in one_error_line(bad_url.stderr)
    assert no_model.returncode == 2
    assert "no model configured" in one_error_line(no_model.stderr)
    assert empty_task.returncode == 2
    assert "the task is empty" in one_error_line(empty_task.stderr)


def test_solve_model_rejecting_the_key_exits_2(scripted_model_server: ScriptedModelServer) -> None:
    scripted_model_server.add(Turn(agent="coder", status=401, error_message="invalid api key"))
    completed = solve(scripted_model_server)
    assert completed.returncode == 2, completed.stderr
    assert "rejected the API key" in completed.stderr


def test_solve_unreachable_endpoint_or_docker_exits_3(
    scripted_model_server: ScriptedModelServer,
) -> None:
    endpoint_down = run_cli("solve", FIBONACCI_TASK, "--base-url", "http://127.0.0.1:9/v1")
    docker_down = solve(scripted_model_server, env=NO_DOCKER)

    assert endpoint_down.returncode == 3, endpoint_down.stderr
    assert "could not be reached after 3 attempt(s)" in one_error_line(endpoint_down.stderr)
    assert docker_down.returncode == 3, docker_down.stderr
    assert "DOCKER_HOST" in one_error_line(docker_down.stderr)
    assert scripted_model_server.requests == []


def test_solve_errors_are_json_with_json(scripted_model_server: ScriptedModelServer) -> None:
    completed = solve(scripted_model_server, "--json", "--max-rounds", "0")
    assert completed.returncode == 2
    error = json.loads(completed.stderr)
    assert error["format"] == 1
    assert error["exit_code"] == 2
    assert error["error"]["kind"] == "usage"
    assert "max_rounds" in error["error"]["message"]


def test_ctrl_c_during_solve_closes_the_transcript_and_exits_130(
    scripted_model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    scripted_model_server.add(coder_turn("```python\nprint(1)\n```", delay=30))
    transcript = tmp_path / "chat.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "sandcrew", "solve", FIBONACCI_TASK, "--base-url",
         scripted_model_server.base_url, "--model", "scripted", "--json",
         "--transcript", str(transcript)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        # The coder's request is in flight once the server has seen it.
        while not any(request.method == "POST" for request in scripted_model_server.requests):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the chat never started"
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()

    assert process.returncode == 130, stderr
    # The Ctrl-C result is the same outcome model, as the chat itself counted it.
    result = CrewResult.model_validate_json(stdout)
    assert result.stop_reason is StopReason.CALLER_STOPPED
    assert result.solved is False
    assert result.rounds == 0  # the coder's reply never came
    assert result.runs == []
    events = read_transcript(transcript)
    assert isinstance(events[0], HeaderEvent)
    assert isinstance(events[-1], ResultEvent)
    assert events[-1].result == result


def test_ctrl_c_during_solve_says_what_stopped_and_counts_only_the_prompt_in_flight(
    scripted_model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    scripted_model_server.add(coder_turn("```python\nprint(1)\n```", delay=30))
    transcript = tmp_path / "chat.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "sandcrew", "solve", FIBONACCI_TASK, "--base-url",
         scripted_model_server.base_url, "--model", "scripted", "--transcript", str(transcript)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not any(request.method == "POST" for request in scripted_model_server.requests):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the chat never started"
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()

    assert process.returncode == 130, stderr
    result = read_transcript(transcript)[-1]
    assert isinstance(result, ResultEvent)
    # The coder's request was abandoned: its prompt was read, its reply never written. It
    # counts the prompt (estimated), not the reply's cap of 2,048 tokens.
    [asked] = [request for request in scripted_model_server.requests if request.method == "POST"]
    assert result.result.total_tokens == estimate_prompt_tokens(asked.body)
    assert result.result.tokens_estimated is True
    assert stderr.splitlines()[-1] == (
        f"Interrupted: the chat was stopped after 0 rounds, 0 runs and "
        f"{result.result.total_tokens:,} tokens (estimated); no container of it is left; "
        f"{transcript} holds the chat so far."
    )


def test_ctrl_c_during_run_says_the_program_was_stopped_and_its_container_removed() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "sandcrew", "run", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
        process.stdin.close()
        assert process.stdout.readline() == "started\n"
        process.send_signal(signal.SIGINT)
        process.stdin = None  # closed above: communicate() must not flush it
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()

    assert process.returncode == 130, stderr
    assert stderr == "Interrupted: the program was stopped and its container removed.\n"
    assert our_containers(shared_client(), owner_pid=process.pid) == []


# suite ----------------------------------------------------------------------------------


def test_suite_rows(tmp_path: Path) -> None:
    passing = run_cli("suite", "run", "basics", "-s", "canonical", "-k", "fibonacci")
    bad_option = run_cli("suite", "run", "basics", "-s", "canonical", "--run-timeout", "inf")
    docker_down = run_cli("suite", "run", "basics", "-s", "canonical", env=NO_DOCKER)

    assert passing.returncode == 0, passing.stderr
    assert bad_option.returncode == 2, bad_option.stderr
    assert "timeout must be at most 86400 seconds" in one_error_line(bad_option.stderr)
    assert docker_down.returncode == 3, docker_down.stderr
    assert "DOCKER_HOST" in one_error_line(docker_down.stderr)
    # 1 (failures) and 130 (Ctrl-C) are in tests/suites/test_cli.py.


# run ------------------------------------------------------------------------------------


def test_run_passes_the_programs_own_exit_code_through() -> None:
    for code in (1, 2, 3):
        completed = run_cli("run", "-", stdin=f"raise SystemExit({code})")
        assert completed.returncode == code, completed.stderr
    # 124 (timed out) and 137 (out of memory) are in tests/cli/test_run_cli.py.


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--timeout", "inf"], "timeout must be at most 86400 seconds (got inf)"),
        (["--timeout", "1e10"], "timeout must be at most 86400 seconds (got 1e+10)"),
        (["--timeout", "nan"], "timeout must be > 0 (got nan)"),
        (["--memory", "99999g"], "memory_bytes must be at most 1 TiB (got 99999 GiB)"),
        (["--language", ""], "'' is not one of 'python', 'bash'"),
        (["--image", "sandcrew/does-not-exist:1"], "docker pull sandcrew/does-not-exist:1"),
    ],
    ids=["inf", "1e10", "nan", "99999g", "empty-language", "missing-image"],
)
def test_run_bad_values_exit_125_with_one_line(args: list[str], expected: str) -> None:
    completed = run_cli("run", "-", *args, stdin="print(1)")
    assert completed.returncode == 125, completed.stderr
    assert expected in one_error_line(completed.stderr)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["run", "-", "--timeout", "abc", "--memory", "lots"],
            "error: Invalid value for '--run-timeout' / '--timeout': Input should be a valid "
            "number, unable to parse string as a number; Invalid value for '--memory': must "
            "look like 256m or 1g (got 'lots') (see: sandcrew run --help)",
        ),
        (
            ["suite", "run", "basics", "-s", "nosolver", "-j", "x"],
            "error: Invalid value for '--solver' / '-s': 'nosolver' is not one of 'canonical', "
            "'completions', 'crew'; Invalid value for '--concurrency' / '-j': Input should be a "
            "valid integer, unable to parse string as an integer (see: sandcrew suite run --help)",
        ),
        (
            ["solve", "--max-rounds", "many"],
            "error: Invalid value for '--max-rounds': Input should be a valid integer, unable to "
            "parse string as an integer; Missing argument 'TASK' (see: sandcrew solve --help)",
        ),
    ],
    ids=["run", "suite-run", "solve"],
)
def test_every_flag_that_cannot_be_read_is_named_in_the_one_error_line(
    args: list[str], expected: str
) -> None:
    completed = run_cli(*args, stdin="print(1)")

    assert completed.returncode == (125 if args[0] == "run" else 2), completed.stderr
    assert one_error_line(completed.stderr) == expected


def test_run_unreachable_docker_exits_125() -> None:
    completed = run_cli("run", "-", stdin="print(1)", env=NO_DOCKER)
    assert completed.returncode == 125
    assert "DOCKER_HOST" in one_error_line(completed.stderr)


def test_run_errors_are_json_with_json() -> None:
    completed = run_cli("run", "-", "--json", "--timeout", "inf", stdin="print(1)")
    assert completed.returncode == 125
    error = json.loads(completed.stderr)
    assert error == {
        "format": 1,
        "error": {"kind": "usage", "message": error["error"]["message"]},
        "exit_code": 125,
    }
    assert "timeout must be at most 86400 seconds" in error["error"]["message"]


@pytest.mark.parametrize(
    ("redirect", "expected"),
    [
        ("<&-", "stdin is closed"),
        (">&-", "stdout is closed"),
        ("> /dev/full", "cannot write the output: No space left on device"),
    ],
    ids=["closed-stdin", "closed-stdout", "dev-full"],
)
def test_run_with_unusable_standard_streams_exits_125(
    tmp_path: Path, redirect: str, expected: str
) -> None:
    program = tmp_path / "hello.py"
    program.write_text("print('hello')\n", encoding="utf-8")
    source = "-" if redirect == "<&-" else str(program)
    completed = subprocess.run(
        ["bash", "-c", f'exec "$0" -m sandcrew run {source} {redirect}', sys.executable],
        stdout=subprocess.PIPE if redirect == "<&-" else None,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        env=os.environ,
    )
    assert completed.returncode == 125, completed.stderr
    assert expected in one_error_line(completed.stderr)
