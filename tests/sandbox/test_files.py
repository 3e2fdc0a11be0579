"""Input files and artifacts on real containers: what goes in, what comes out, what is refused."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import docker
import pytest

from sandcrew.errors import UserError
from sandcrew.sandbox import DockerSandbox, SandboxConfig
from sandcrew.sandbox._files import parse_artifacts
from sandcrew.sandbox._streams import CappedBuffer, TrailedStream
from tests.programs_files import CSV, CSV_SUMMARY, CSV_TO_PNG_PROGRAM, png_size

pytestmark = pytest.mark.docker


async def test_a_csv_goes_in_and_a_png_comes_out(sandbox: DockerSandbox) -> None:
    result = await sandbox.run(CSV_TO_PNG_PROGRAM, files={"data.csv": CSV.encode()})

    assert result.ok, result.stderr
    assert result.stdout == CSV_SUMMARY
    [plot] = result.artifacts
    assert (plot.name, plot.media_type, plot.size) == ("plot.png", "image/png", len(plot.data))
    assert png_size(plot.data) == (120, 80)
    assert not result.artifacts_truncated
    message = result.to_runner_message()
    assert f"[files]\nout/plot.png ({plot.size} bytes, image/png)" in message


async def test_input_files_are_read_only_and_may_sit_in_folders(sandbox: DockerSandbox) -> None:
    program = (
        "import os, stat\n"
        "print(open('data/a.txt').read(), oct(stat.S_IMODE(os.stat('data/a.txt').st_mode)))\n"
        "try:\n    open('data/a.txt', 'a')\nexcept PermissionError:\n    print('refused')\n"
    )
    result = await sandbox.run(program, files={"data/a.txt": b"hello"})

    assert result.stdout == "hello 0o444\nrefused\n", result.stderr
    assert result.artifacts == ()


async def test_the_program_can_neither_chmod_nor_rewrite_an_input_file(
    sandbox: DockerSandbox,
) -> None:
    program = (
        "import os\n"
        "for name in ('data.csv', 'sub/t.txt'):\n"
        "    try:\n        os.chmod(name, 0o644)\n    except PermissionError:\n"
        "        print('chmod refused')\n"
        "    try:\n        open(name, 'w').write('changed')\n    except PermissionError:\n"
        "        print('write refused')\n"
        "    print(open(name).read(), oct(os.stat(name).st_mode & 0o777), os.stat(name).st_uid)\n"
        "open('mine.txt', 'w').write('new')\n"
        "print(open('mine.txt').read())\n"
    )
    result = await sandbox.run(program, files={"data.csv": b"a,b\n", "sub/t.txt": b"text"})

    assert result.stdout == (
        "chmod refused\nwrite refused\na,b\n 0o444 0\n"
        "chmod refused\nwrite refused\ntext 0o444 0\n"
        "new\n"
    ), result.stderr


async def test_links_fifos_and_odd_names_in_out_are_left_out(sandbox: DockerSandbox) -> None:
    program = (
        "import os\n"
        "os.symlink('/etc/passwd', 'out/passwd')\n"
        "os.symlink('/home', 'out/host')\n"
        "os.mkfifo('out/fifo')\n"
        "open(b'out/bad\\xff', 'w').write('x')\n"
        "os.makedirs('out/tables')\n"
        "open('out/tables/t.csv', 'w').write('a,b\\n')\n"
    )
    result = await sandbox.run(program)

    assert result.ok, result.stderr
    assert [(item.name, item.data) for item in result.artifacts] == [("tables/t.csv", b"a,b\n")]
    assert result.artifacts[0].media_type == "text/csv"
    skipped = "\n".join(result.artifacts_skipped)
    assert "passwd: a symbolic link" in skipped
    assert "host: a symbolic link" in skipped
    assert "fifo: not a regular file" in skipped
    assert "the name is not UTF-8" in skipped
    assert "root:" not in result.to_runner_message()


async def test_an_out_folder_replaced_by_a_link_gives_nothing(sandbox: DockerSandbox) -> None:
    program = "import os\nos.rmdir('out')\nos.symlink('/etc', 'out')\n"
    result = await sandbox.run(program)

    assert result.ok, result.stderr
    assert result.artifacts == ()
    assert result.artifacts_skipped == ("out: not a folder",)


async def test_a_huge_artifact_is_cut_off_and_flagged(docker_client: docker.DockerClient) -> None:
    # The program tries to write 1 GiB; the file-size limit stops it at 16 MiB, and the
    # artifact caps (4 MiB) leave the file out with the truncation flag.
    config = SandboxConfig(timeout=10.0, max_artifact_bytes=4 * 1024 * 1024)
    program = (
        "import os\n"
        "open('out/small.txt', 'w').write('kept')\n"
        "try:\n"
        "    with open('out/huge.bin', 'wb') as handle:\n"
        "        for _ in range(1024):\n"
        "            handle.write(os.urandom(1024 * 1024))\n"
        "except OSError as error:\n"
        "    print('stopped:', error.strerror)\n"
    )
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        result = await sandbox.run(program)

    assert "stopped: File too large" in result.stdout, result.stderr
    assert [item.name for item in result.artifacts] == ["small.txt"]
    assert result.artifacts_truncated
    assert "huge.bin: over the artifact limits" in result.artifacts_skipped
    assert "[some files were left out: over the output limits]" in result.to_runner_message()


async def test_the_artifact_count_is_capped(docker_client: docker.DockerClient) -> None:
    config = SandboxConfig(timeout=5.0, max_artifacts=3)
    program = "for n in range(10):\n    open(f'out/{n}.txt', 'w').write(str(n))\n"
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        result = await sandbox.run(program)

    assert [item.name for item in result.artifacts] == ["0.txt", "1.txt", "2.txt"]
    assert result.artifacts_truncated


async def test_a_timed_out_run_still_returns_what_it_wrote_before_the_deadline(
    docker_client: docker.DockerClient,
) -> None:
    program = (
        "import time\n"
        "with open('out/partial.txt', 'w') as handle:\n"
        "    handle.write('rows 1-500 done')\n"
        "print('written', flush=True)\n"
        "time.sleep(60)\n"
    )
    async with DockerSandbox(SandboxConfig(timeout=2.0), docker_client=docker_client) as sandbox:
        result = await sandbox.run(program)

    assert result.timed_out, result
    assert result.exit_code == 124
    assert result.stdout == "written\n"
    assert [(item.name, item.data) for item in result.artifacts] == [
        ("partial.txt", b"rows 1-500 done")
    ]
    assert "out/partial.txt (15 bytes, text/plain)" in result.to_runner_message()


@pytest.mark.parametrize("sleeps", [False, True], ids=["ends", "times-out"])
async def test_a_non_blocking_stdout_neither_cuts_the_artifacts_nor_hides_the_timeout(
    docker_client: docker.DockerClient, sleeps: bool
) -> None:
    # The program shares its stdout with the supervisor; a full pipe must not cut the
    # artifacts frame (4 MiB) or the trailer that says the run timed out.
    program = (
        "import fcntl, os, time\n"
        "fcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) | os.O_NONBLOCK)\n"
        "with open('out/big.bin', 'wb') as handle:\n"
        "    handle.write(b'7' * (4 << 20))\n"
        "print('written', flush=True)\n" + ("time.sleep(60)\n" if sleeps else "")
    )
    async with DockerSandbox(SandboxConfig(timeout=2.0), docker_client=docker_client) as sandbox:
        result = await sandbox.run(program)

    assert result.timed_out is sleeps, result
    assert result.exit_code == (124 if sleeps else 0), result
    assert [(item.name, item.size) for item in result.artifacts] == [("big.bin", 4 << 20)], result
    assert not result.artifacts_truncated


async def test_a_program_cannot_forge_artifacts(sandbox: DockerSandbox) -> None:
    # Without the nonce, a frame-like line is plain output.
    program = "import sys\nsys.stdout.buffer.write(b'\\x1eAAAA:A5\\nhello')\n"
    result = await sandbox.run(program)

    assert result.artifacts == ()
    assert result.stdout == "\x1eAAAA:A5\nhello"


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"../escape.txt": b"x"}, "refused"),
        ({"/etc/passwd": b"x"}, "refused"),
        ({"a/./b": b"x"}, "refused"),
        ({"bad\udcff": b"x"}, "not valid UTF-8"),
        ({"main.py": b"x"}, "reserved"),
        ({"out/x": b"x"}, "reserved"),
        ({"d": b"x", "d/e": b"y"}, "also used as a folder"),
    ],
)
async def test_bad_input_names_are_refused_before_any_container(
    sandbox: DockerSandbox, files: dict[str, bytes], message: str
) -> None:
    with pytest.raises(UserError, match=message):
        await sandbox.run("print(1)", files=files)


async def test_input_caps_are_clear_errors(docker_client: docker.DockerClient) -> None:
    config = SandboxConfig(max_input_files=2, max_input_bytes=1024 * 1024)
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        with pytest.raises(UserError, match=r"too many input files: 3 \(the limit is 2"):
            await sandbox.run("print(1)", files={"a": b"", "b": b"", "c": b""})
        with pytest.raises(UserError, match="more than the input limit of 1048576 bytes"):
            await sandbox.run("print(1)", files={"big.bin": b"x" * (1024 * 1024 + 1)})


async def test_names_with_control_characters_are_left_out(sandbox: DockerSandbox) -> None:
    program = "open('out/\\x1b[31mred', 'w').write('x')\nopen('out/fine.txt', 'w').write('y')\n"
    result = await sandbox.run(program)

    assert [item.name for item in result.artifacts] == ["fine.txt"]
    assert result.artifacts_skipped == ("'\\x1b[31mred': control characters in the name",)


async def test_a_missing_host_file_is_a_clear_error(sandbox: DockerSandbox, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"input file not found: .*nothing\.csv"):
        await sandbox.run("print(1)", files={"data.csv": tmp_path / "nothing.csv"})
    with pytest.raises(UserError, match="is a folder"):
        await sandbox.run("print(1)", files={"data.csv": tmp_path})


async def test_a_fifo_or_an_endless_device_as_input_is_refused_at_once(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    fifo = tmp_path / "data.fifo"
    os.mkfifo(fifo)
    # A FIFO with no writer would block the open forever; a device's size says 0.
    with pytest.raises(UserError, match=r"input file .*data\.fifo is not a regular file"):
        await asyncio.wait_for(sandbox.run("print(1)", files={"data.csv": fifo}), timeout=10)
    with pytest.raises(UserError, match=r"input file /dev/zero is not a regular file"):
        await sandbox.run("print(1)", files={"data.csv": Path("/dev/zero")})


async def test_a_host_file_over_the_cap_is_refused_without_reading_it_all(
    docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * (1024 * 1024 + 1))
    config = SandboxConfig(max_input_bytes=1024 * 1024)
    async with DockerSandbox(config, docker_client=docker_client) as sandbox:
        with pytest.raises(UserError, match=r"input file .*big\.bin: more than the input limit"):
            await sandbox.run("print(1)", files={"big.bin": big})
        exact = tmp_path / "exact.bin"
        exact.write_bytes(b"y" * (1024 * 1024))
        result = await sandbox.run(
            "import os\nprint(os.path.getsize('exact.bin'))", files={"exact.bin": exact}
        )
    assert (result.exit_code, result.stdout) == (0, "1048576\n"), result


@pytest.mark.parametrize("chunk_size", [1, 7, 4096])
def test_the_artifacts_frame_is_taken_off_stdout_however_it_is_split(chunk_size: int) -> None:
    mark = b"\x1eNONCE:"
    frame = b'{"files": [{"name": "a.txt", "size": 3}], "skipped": [], "truncated": false}\nabc'
    stdout = b"printed\n" + mark + b"A" + str(len(frame)).encode() + b"\n" + frame + mark + b"0\n"
    stream = TrailedStream(CappedBuffer(1 << 20), mark, CappedBuffer(1 << 20))
    for start in range(0, len(stdout), chunk_size):
        stream.feed(stdout[start : start + chunk_size])
    stream.finish()

    assert (bytes(stream.sink.data), stream.status) == (b"printed\n", 0)
    assert stream.artifacts is not None
    artifacts, truncated, skipped = parse_artifacts(bytes(stream.artifacts.data), received_all=True)
    assert [(item.name, item.data, item.media_type) for item in artifacts] == [
        ("a.txt", b"abc", "text/plain")
    ]
    assert (truncated, skipped) == (False, [])


def test_an_artifacts_frame_over_the_host_cap_gives_nothing_but_the_flag() -> None:
    artifacts, truncated, skipped = parse_artifacts(b"{...", received_all=False)
    assert (artifacts, truncated) == ([], True)
    assert skipped == ["the artifacts exceeded what the host accepts"]
