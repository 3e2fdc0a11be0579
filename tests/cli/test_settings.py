"""The configuration edge: flags > environment > TOML file > defaults, and where each came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandcrew.cli._options import MEMORY_DEFAULT, MODEL_DEFAULT, RUN_TIMEOUT_DEFAULT
from sandcrew.crew import CrewMode
from sandcrew.errors import ConfigurationError, InvalidSettings
from sandcrew.sandbox import SandboxConfig
from sandcrew.settings import McpSettings, describe_settings, load_settings
from tests.process import run_cli

CONFIG = """
mode = "admin"
max_rounds = 7
token_budget = 5000
[endpoint]
model = "from-file"
base_url = "http://file.example/v1"
timeout = 120
[sandbox]
timeout = 30
"""


@pytest.fixture
def config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for variable in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "SANDCREW_MODEL", "SANDCREW_CONFIG"):
        monkeypatch.delenv(variable, raising=False)
    path = tmp_path / "config.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


def test_flags_beat_environment_beat_file_beat_defaults(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANDCREW_MAX_ROUNDS", "9")
    monkeypatch.setenv("SANDCREW_MODEL", "from-env")
    monkeypatch.setenv("SANDCREW_ENDPOINT__RETRIES", "5")
    flags = {"max_rounds": 11, "endpoint": {"model": None}, "sandbox": {"timeout": 4.0}}

    settings = load_settings(flags, config_path=config_file)

    assert settings.max_rounds == 11  # flag over environment and file
    assert settings.endpoint.model == "from-env"  # environment over file (flag not given)
    assert settings.endpoint.retries == 5
    assert settings.endpoint.base_url == "http://file.example/v1"
    assert settings.endpoint.timeout == 120
    assert settings.mode is CrewMode.ADMIN
    assert settings.sandbox.timeout == 4.0
    assert settings.sandbox.memory_bytes == SandboxConfig().memory_bytes
    sources = {
        item.name: item.source
        for item in describe_settings(settings, flags, config_path=config_file)
    }
    assert sources["max_rounds"] == "command line"
    assert sources["endpoint.model"] == "environment"
    assert sources["endpoint.retries"] == "environment"
    assert sources["endpoint.base_url"] == f"config file {config_file}"
    assert sources["sandbox.timeout"] == "command line"
    assert sources["sandbox.memory_bytes"] == "default"


def test_bad_values_name_the_setting_and_its_source(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANDCREW_TIME_BUDGET", "inf")
    with pytest.raises(ConfigurationError) as raised:
        load_settings({"max_rounds": 0}, config_path=config_file)
    message = str(raised.value)
    assert "max_rounds (command line): Input should be greater than or equal to 1" in message
    assert "time_budget (environment): Input should be a finite number" in message


@pytest.mark.parametrize(
    ("variable", "expected"),
    [
        ("SANDCREW_SANDBOX__TIMEOUT", "sandbox.timeout (environment): timeout must be > 0"),
        ("SANDCREW_ENDPOINT__TIMEOUT", "endpoint.timeout (environment): Input should be greater"),
        ("SANDCREW_MAX_ROUNDS", "max_rounds (environment): Input should be greater"),
    ],
    ids=["sandbox", "endpoint", "top-level"],
)
def test_a_bad_nested_value_is_reported_like_a_top_level_one(
    variable: str, expected: str, config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, "-3")
    with pytest.raises(ConfigurationError) as raised:
        load_settings(config_path=config_file)
    assert str(raised.value).startswith("invalid settings: ")
    assert expected in str(raised.value)


def test_a_nested_settings_model_alone_still_raises_one_clear_error() -> None:
    with pytest.raises(InvalidSettings) as raised:
        SandboxConfig(timeout=-3, pids_limit=0)
    assert str(raised.value) == (
        "invalid sandbox settings: timeout must be > 0 (got -3); pids_limit must be > 0 (got 0)"
    )
    assert raised.value.problems == [
        ("timeout", "timeout must be > 0 (got -3)"),
        ("pids_limit", "pids_limit must be > 0 (got 0)"),
    ]


def test_unreadable_config_files_are_one_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("max_rounds = [", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="is not valid TOML"):
        load_settings(config_path=broken)
    with pytest.raises(ConfigurationError, match="config file not found"):
        load_settings(config_path=tmp_path / "missing.toml")
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("max_round = 3\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"max_round .*Extra inputs are not permitted"):
        load_settings(config_path=unknown)


def test_help_shows_the_defaults_of_the_settings_models() -> None:
    assert (RUN_TIMEOUT_DEFAULT, MEMORY_DEFAULT, MODEL_DEFAULT) == (10.0, "256m", "gpt-4o-mini")
    completed = run_cli("run", "--help")  # piped: no hard wrap at 80 columns
    assert any(
        line.strip().startswith("Exit codes (as docker run)")
        and line.rstrip().endswith("125 sandcrew itself failed (bad option, Docker, image).")
        for line in completed.stdout.splitlines()
    ), completed.stdout
    assert "[default: (10)]" in completed.stdout
    assert "[default: (256m)]" in completed.stdout
    solve_help = run_cli("solve", "-h", env={"COLUMNS": "200"}).stdout
    assert "[default: (gpt-4o-mini)]" in solve_help
    assert "<workflow|admin|workflow+admin>" in solve_help


def test_version_flag_prints_the_version() -> None:
    import sandcrew

    completed = run_cli("--version")
    assert completed.returncode == 0
    assert completed.stdout.strip() == sandcrew.__version__


@pytest.mark.docker
def test_doctor_reports_where_each_setting_came_from(config_file: Path) -> None:
    completed = run_cli(
        "doctor", "--no-self-test", "--config", str(config_file), "--model", "from-flag",
        env={"COLUMNS": "250", "SANDCREW_MAX_ROUNDS": "9", "OPENAI_BASE_URL": "",
             "OPENAI_API_KEY": ""},
    )  # fmt: skip
    lines = {
        line.split("│")[1].strip(): line for line in completed.stdout.splitlines() if "│" in line
    }
    assert "from-flag (command line)" in lines["setting endpoint.model"]
    assert "9 (environment)" in lines["setting max_rounds"]
    assert f"admin (config file {config_file})" in lines["setting mode"]
    assert "not set (default)" in lines["setting endpoint.api_key"]


HELP_COMMANDS = [
    ["solve"], ["run"], ["suite", "run"], ["suite", "evaluate"], ["suite", "report"],
    ["suite", "list"], ["images", "build"], ["images", "list"], ["doctor"], ["mcp"],
    ["transcript"], ["sandbox", "gc"], ["repl"],
]  # fmt: skip
USAGES = {
    "run": "sandcrew run [OPTIONS] {FILE}",
    "solve": "sandcrew solve [OPTIONS] {TASK}",
    "suite run": "sandcrew suite run [OPTIONS] {SUITE}",
    "suite evaluate": "sandcrew suite evaluate [OPTIONS] {SAMPLES}",
    "suite report": "sandcrew suite report [OPTIONS] {REPORT}",
    "transcript": "sandcrew transcript [OPTIONS] {FILE}",
    "images build": "sandcrew images build [OPTIONS] [NAME]...",
}
CHOICES = {
    ("solve", "--mode"): "<workflow|admin|workflow+admin>",
    ("run", "--language"): "<python|bash|javascript>",
    ("repl", "--language"): "<python|bash|javascript>",
    ("suite run", "--solver"): "<canonical|completions|crew>",
    ("suite run", "--executor"): "<local|ray>",
}


@pytest.mark.parametrize("command", HELP_COMMANDS, ids=" ".join)
def test_help_lists_choices_and_shows_flags_without_a_type(command: list[str]) -> None:
    completed = run_cli(*command, "-h", env={"COLUMNS": "200"})

    assert completed.returncode == 0, completed.stderr
    assert "--" in completed.stdout
    for word in ("<bool>", "<boolean>", "BOOLEAN"):
        assert word not in completed.stdout
    # A repeatable option takes one value each time: it is named for that value.
    options = [line for line in completed.stdout.splitlines() if line.lstrip().startswith("-")]
    assert not [line for line in options if "<list[" in line]
    # Arguments are named for what they take (FILE, TASK, SUITE), not for the parameter.
    usage = completed.stdout.split("Usage: ", 1)[1].splitlines()[0]
    assert usage == USAGES.get(" ".join(command), usage), usage
    for (name, option), choices in CHOICES.items():
        if name == " ".join(command):
            assert any(
                option in line and choices in line for line in completed.stdout.splitlines()
            ), completed.stdout


def test_every_table_of_the_root_reads_from_file_environment_and_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        "[sessions]\ncell_timeout = 45\nmax_sessions = 5\n"
        "[mcp]\nmax_sessions = 2\nclient_idle_timeout = 30\n"
        "[suites]\nconcurrency = 3\nevaluate_timeout = 7\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("SANDCREW_MCP__MAX_SESSIONS_TOTAL", "9")

    settings = load_settings({"suites": {"concurrency": 6}}, config_path=path)

    assert (settings.sessions.cell_timeout, settings.sessions.max_sessions) == (45, 5)
    assert settings.mcp.max_sessions == 2
    assert settings.mcp.client_idle_timeout == 30
    assert settings.mcp.max_sessions_total == 9
    assert settings.mcp.session_lifetime == McpSettings().session_lifetime
    assert (settings.suites.concurrency, settings.suites.evaluate_timeout) == (6, 7)
    listed = {value.name: value.source for value in describe_settings(settings, config_path=path)}
    assert listed["mcp.max_sessions_total"] == "environment"
    assert listed["sessions.cell_timeout"].startswith("config file")


def test_a_bad_value_in_a_new_table_is_named_with_its_source(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[mcp]\nmax_sessions = -1\n[sessions]\nmax_file_bytes = 0\n", "utf-8")

    with pytest.raises(ConfigurationError) as raised:
        load_settings(config_path=path)

    message = str(raised.value)
    assert f"mcp.max_sessions (config file {path}): " in message
    assert f"sessions.max_file_bytes (config file {path}): " in message


def test_the_mcp_server_refuses_a_client_cap_above_the_total() -> None:
    completed = run_cli("mcp", "--max-sessions", "5", "--max-sessions-total", "2")

    assert completed.returncode == 2
    assert "--max-sessions (5, per client) is more than --max-sessions-total (2" in (
        completed.stderr
    )
