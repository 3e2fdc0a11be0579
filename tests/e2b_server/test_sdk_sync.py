"""The unmodified E2B SDK (sync) against a `sandcrew e2b` the test started: what users run."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from e2b import (
    AuthenticationException,
    CommandExitException,
    ConnectionConfig,
    FileNotFoundException,
    InvalidArgumentException,
    NotFoundException,
    SandboxException,
    TimeoutException,
)
from e2b_code_interpreter import Sandbox

from tests.e2b_server.helpers import E2bServer

pytestmark = pytest.mark.docker

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def sandbox(e2b_env: E2bServer) -> Iterator[Sandbox]:
    created = Sandbox.create()
    yield created
    created.kill()


def test_state_is_kept_across_cells_and_output_comes_live(sandbox: Sandbox) -> None:
    seen: list[str] = []
    first = sandbox.run_code("x = 41\nprint('hello')", on_stdout=lambda m: seen.append(m.line))
    second = sandbox.run_code("x + 1")
    assert first.logs.stdout == ["hello\n"]
    assert seen == ["hello\n"]
    assert second.text == "42"
    assert second.results[0].is_main_result
    assert second.execution_count == 2


def test_a_figure_comes_back_as_png(sandbox: Sandbox) -> None:
    execution = sandbox.run_code("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()")
    assert execution.error is None
    images = [result.png for result in execution.results if result.png]
    assert images
    assert base64.b64decode(images[0]).startswith(PNG_SIGNATURE)


def test_an_error_has_its_name_value_and_traceback(sandbox: Sandbox) -> None:
    errors = []
    execution = sandbox.run_code("1 / 0", on_error=errors.append)
    assert execution.error is not None
    assert errors == [execution.error]
    assert execution.error.name == "ZeroDivisionError"
    assert execution.error.value == "division by zero"
    assert "ZeroDivisionError" in execution.error.traceback


def test_contexts_are_namespaces_of_their_own(sandbox: Sandbox) -> None:
    sandbox.run_code("shared = 'default'")
    context = sandbox.create_code_context()
    assert context.cwd == "/home/user"
    assert context.language == "python"
    assert context.id in [listed.id for listed in sandbox.list_code_contexts()]
    missing = sandbox.run_code("shared", context=context)
    assert missing.error is not None
    assert missing.error.name == "NameError"
    sandbox.run_code("mine = 1", context=context)
    assert sandbox.run_code("mine", context=context).text == "1"
    sandbox.restart_code_context(context)
    assert sandbox.run_code("mine", context=context).error is not None
    sandbox.remove_code_context(context)
    assert context.id not in [listed.id for listed in sandbox.list_code_contexts()]
    assert sandbox.run_code("shared").text == "'default'"


def test_files_code_and_commands_see_the_same_home(sandbox: Sandbox) -> None:
    sandbox.files.write("/home/user/a.txt", "from the files API")
    assert sandbox.files.read("a.txt") == "from the files API"
    assert sandbox.run_code("open('a.txt').read()").text == "'from the files API'"
    assert sandbox.commands.run("cat /home/user/a.txt").stdout == "from the files API"
    sandbox.commands.run("mkdir -p out && echo made > out/b.txt")
    assert sandbox.files.read("/home/user/out/b.txt") == "made\n"
    assert sandbox.run_code("import os; os.getcwd()").text == "'/home/user'"
    assert sandbox.commands.run("pwd").stdout.strip() == "/home/user"


def test_the_filesystem_calls(sandbox: Sandbox) -> None:
    sandbox.files.write("data.bin", b"\x00\x01\x02")
    assert bytes(sandbox.files.read("data.bin", format="bytes")) == b"\x00\x01\x02"
    assert sandbox.files.exists("data.bin")
    assert not sandbox.files.exists("nothing")
    assert sandbox.files.make_dir("folder") is True
    assert sandbox.files.make_dir("folder") is False
    moved = sandbox.files.rename("data.bin", "folder/moved.bin")
    assert moved.path == "/home/user/folder/moved.bin"
    assert moved.size == 3
    listed = {entry.path: entry.type.value for entry in sandbox.files.list("/home/user", depth=2)}
    assert listed["/home/user/folder"] == "dir"
    assert listed["/home/user/folder/moved.bin"] == "file"
    sandbox.files.remove("folder")
    assert not sandbox.files.exists("folder/moved.bin")
    written = sandbox.files.write_files(
        [{"path": "one.txt", "data": "1"}, {"path": "two/two.txt", "data": "2"}]
    )
    assert [info.path for info in written] == ["/home/user/one.txt", "/home/user/two/two.txt"]
    assert sandbox.files.get_info("two").type.value == "dir"


def test_a_missing_file_is_the_sdks_not_found(sandbox: Sandbox) -> None:
    with pytest.raises(FileNotFoundException):
        sandbox.files.read("missing.txt")
    with pytest.raises(NotFoundException):
        sandbox.files.get_info("missing.txt")


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "../../etc/passwd", "/home/user/../../etc/shadow", "/tmp/x"]
)
def test_paths_outside_home_user_are_refused(sandbox: Sandbox, path: str) -> None:
    with pytest.raises(InvalidArgumentException, match=r"outside|\.\."):
        sandbox.files.read(path)
    with pytest.raises(InvalidArgumentException):
        sandbox.files.write(path, "x")
    with pytest.raises(InvalidArgumentException):
        sandbox.files.make_dir(path)


def test_a_failing_command_gives_its_exit_code(sandbox: Sandbox) -> None:
    with pytest.raises(CommandExitException) as failed:
        sandbox.commands.run("echo out; echo err >&2; exit 3")
    assert failed.value.exit_code == 3
    assert failed.value.stdout == "out\n"
    assert failed.value.stderr == "err\n"


def test_a_background_command_is_killed_by_signal(sandbox: Sandbox) -> None:
    handle = sandbox.commands.run("sleep 60", background=True)
    assert sandbox.commands.kill(handle.pid) is True
    with pytest.raises(CommandExitException) as killed:
        handle.wait()
    assert killed.value.exit_code != 0
    assert sandbox.commands.kill(handle.pid) is False


def test_a_cell_over_its_client_timeout_is_interrupted_and_the_state_kept(
    sandbox: Sandbox,
) -> None:
    sandbox.run_code("kept = 'still here'")
    with pytest.raises(TimeoutException):
        sandbox.run_code("import time\nwhile True: time.sleep(0.1)", timeout=2)
    assert sandbox.run_code("kept").text == "'still here'"


def test_a_flood_of_output_is_bounded_and_the_sandbox_goes_on(sandbox: Sandbox) -> None:
    flood = sandbox.run_code("for i in range(200_000): print('x' * 100)")
    assert flood.error is None
    assert sum(len(line) for line in flood.logs.stdout) < 20_000_000
    assert any("truncated" in line for line in flood.logs.stderr)
    assert sandbox.run_code("1 + 1").text == "2"


def test_set_timeout_connect_and_info(sandbox: Sandbox) -> None:
    sandbox.set_timeout(120)
    info = sandbox.get_info()
    assert info.sandbox_id == sandbox.sandbox_id
    assert info.state.value == "running"
    assert 100 < (info.end_at - info.started_at).total_seconds() <= 130
    sandbox.run_code("joined = True")
    again = Sandbox.connect(sandbox.sandbox_id)
    assert again.run_code("joined").text == "True"
    assert sandbox.is_running()


def test_killing_twice_answers_not_found(e2b_env: E2bServer) -> None:
    created = Sandbox.create()
    assert created.kill() is True
    assert Sandbox.kill(created.sandbox_id) is False
    assert not created.is_running()
    with pytest.raises(SandboxException):
        created.run_code("1")


def test_a_sandbox_is_killed_at_its_timeout(e2b_env: E2bServer) -> None:
    created = Sandbox.create(timeout=4)  # room for the call to arrive on a loaded machine
    deadline_passed = created.run_code("import time; time.sleep(8)", timeout=30)
    assert deadline_passed.error is not None or not created.is_running()
    assert not created.is_running()


def test_a_wrong_key_is_the_sdks_authentication_error(
    e2b_env: E2bServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("E2B_API_KEY", "e2b_" + "f" * 40)
    with pytest.raises(AuthenticationException):
        Sandbox.create()


@pytest.mark.parametrize("token", ["wrong", None], ids=["wrong", "none"])
def test_a_sandbox_without_its_access_token_is_the_sdks_authentication_error(
    e2b_env: E2bServer, sandbox: Sandbox, token: str | None
) -> None:
    sandbox.files.write("kept.txt", "secret")
    headers = {"E2b-Sandbox-Id": sandbox.sandbox_id}
    if token is not None:
        headers["X-Access-Token"] = token
    config = ConnectionConfig(
        api_url=e2b_env.url, sandbox_url=e2b_env.url, extra_sandbox_headers=headers
    )
    forged = Sandbox(
        sandbox_id=sandbox.sandbox_id,
        sandbox_domain=sandbox.sandbox_domain,
        envd_version=sandbox._envd_version,
        envd_access_token=token,
        traffic_access_token=None,
        connection_config=config,
    )
    with pytest.raises(AuthenticationException):
        forged.commands.run("echo hi")
    with pytest.raises(AuthenticationException):
        forged.files.read("kept.txt")
    with pytest.raises(AuthenticationException):
        forged.files.write("kept.txt", "overwritten")
    with pytest.raises(SandboxException, match="401"):  # the code interpreter's own mapping
        forged.run_code("1")
    assert sandbox.files.read("kept.txt") == "secret"


def test_a_template_not_served_is_refused_clearly(e2b_env: E2bServer) -> None:
    with pytest.raises(SandboxException, match="not available"):
        Sandbox.create(template="desktop")


def test_what_is_not_served_says_so(sandbox: Sandbox) -> None:
    with pytest.raises(SandboxException, match="not implemented"):
        sandbox.pause()
    with pytest.raises(SandboxException, match="not implemented"):
        sandbox.run_code("console.log(1)", language="javascript")
    with pytest.raises(SandboxException, match="not implemented"):
        sandbox.files.watch_dir("/home/user")
    from e2b import PtySize

    with pytest.raises(SandboxException, match="not implemented"):
        sandbox.pty.create(PtySize(rows=24, cols=80))
    with pytest.raises(SandboxException, match="not implemented"):
        sandbox.create_snapshot()
    with pytest.raises(SandboxException, match="not implemented"):
        sandbox.get_metrics()
    assert sandbox.run_code("'still here'").text == "'still here'"


def test_stderr_comes_live_to_its_callback(sandbox: Sandbox) -> None:
    errors: list[str] = []
    outputs: list[str] = []
    execution = sandbox.run_code(
        "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)",
        on_stdout=lambda message: outputs.append(message.line),
        on_stderr=lambda message: errors.append(message.line),
    )
    assert outputs == ["to stdout\n"]
    assert errors == ["to stderr\n"]
    assert execution.logs.stderr == ["to stderr\n"]
