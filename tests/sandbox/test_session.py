"""Python sessions on real Docker: state between cells, display outputs, limits, files."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import docker
import pytest

from sandcrew.errors import SessionFileError, SessionLimitError, UserError
from sandcrew.sandbox import (
    CellResult,
    DisplayOutput,
    DockerSandbox,
    OutputEvent,
    SandboxConfig,
    Session,
    SessionClosedError,
    SessionLimits,
    SessionPool,
    SyncSession,
)
from tests.sandbox.helpers import our_containers

pytestmark = pytest.mark.docker

LIMITS = SessionLimits(cell_timeout=10, interrupt_grace=3)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
async def session(sandbox: DockerSandbox) -> AsyncIterator[Session]:
    async with sandbox.session("python", limits=LIMITS) as started:
        yield started


async def test_variables_imports_and_the_working_directory_persist(session: Session) -> None:
    first = await session.run("import math\nx = 41\nimport os\nos.mkdir('d')\nos.chdir('d')")
    second = await session.run("print(math.pi > 3, x + 1, os.getcwd())")

    assert first.ok, first
    assert second.stdout == "True 42 /workspace/d\n"
    assert (first.execution_count, second.execution_count) == (1, 2)


async def test_the_last_expression_of_a_cell_is_displayed(session: Session) -> None:
    result = await session.run("x = 6\nx * 7")
    quiet = await session.run("x * 7;")

    assert result.outputs == [DisplayOutput(kind="result", data={"text/plain": "42"})]
    assert result.stdout == ""
    assert quiet.outputs == []


async def test_display_and_rich_reprs_give_mime_bundles_in_order(session: Session) -> None:
    code = """
from IPython.display import HTML, display
class Chart:
    def _repr_png_(self):
        return b"\\x89PNG\\r\\n\\x1a\\nnot really"
    def _repr_html_(self):
        return "<i>chart</i>"
print("before")
display(HTML("<b>first</b>"))
display(Chart())
Chart()
"""
    result = await session.run(code)

    assert result.ok, result
    assert result.stdout == "before\n"
    first, second, last = result.outputs
    assert first.kind == "display"
    assert first.data["text/html"] == "<b>first</b>"
    assert second.data["image/png"] == PNG_SIGNATURE + b"not really"
    assert second.data["text/html"] == "<i>chart</i>"
    assert last.kind == "result"
    assert last.data["image/png"] == PNG_SIGNATURE + b"not really"


async def test_an_error_is_reported_and_the_session_goes_on(session: Session) -> None:
    failed = await session.run("y = 1\nraise ValueError('bad input')")
    broken = await session.run("def f(:")
    after = await session.run("print(y)")

    assert failed.error is not None
    assert (failed.error.name, failed.error.value) == ("ValueError", "bad input")
    assert "raise ValueError('bad input')" in failed.error.traceback
    assert not failed.timed_out
    assert not failed.state_lost
    assert broken.error is not None
    assert broken.error.name == "SyntaxError"
    assert after.stdout == "1\n"


async def test_code_with_a_lone_surrogate_is_refused_and_the_session_goes_on(
    session: Session,
) -> None:
    with pytest.raises(UserError) as refused:
        await session.run("text = '\ud800'")
    assert "position 8 ('\\ud800') is a lone surrogate" in str(refused.value)
    assert (await session.run("print('after')")).stdout == "after\n"


async def test_an_abandoned_stream_interrupts_its_own_cell_when_asked(session: Session) -> None:
    slow = "import time\nstarted = True\nprint('go', flush=True)\ntime.sleep(600)"
    # A limit far beyond the wait below: only the interrupt ends the cell in time.
    events = session.stream(slow, timeout=600, interrupt_if_abandoned=True)
    async with contextlib.aclosing(events):
        async for event in events:
            assert isinstance(event, OutputEvent)
            break  # its first output: the cell runs, and is left
    after = await asyncio.wait_for(session.run("print(started)"), 60)
    assert after.stdout == "True\n"


async def test_a_queued_stream_abandoned_leaves_the_running_cell_alone(session: Session) -> None:
    first = asyncio.create_task(session.run("import time\ntime.sleep(3)\nprint('first done')"))
    await asyncio.sleep(1)
    second = session.stream("print('second')", interrupt_if_abandoned=True)
    waiting = asyncio.create_task(anext(second))
    await asyncio.sleep(0.5)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    done = await asyncio.wait_for(first, 60)
    assert done.error is None
    assert done.stdout == "first done\n"
    assert (await session.run("print('next')")).stdout == "next\n"


@pytest.mark.parametrize("interrupt_if_abandoned", [False, True], ids=["kept", "interrupted"])
async def test_a_cell_cancelled_while_it_is_being_sent_keeps_the_turn_until_it_ends(
    session: Session, interrupt_if_abandoned: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The moment is a few microseconds wide: the cell's frame has gone to the container and
    # its caller has not resumed yet. The send is held there until the caller is cancelled.
    sent, cancelled = threading.Event(), threading.Event()
    send = session._send  # the only place that moment can be held

    def send_then_hold(kind: str, ident: str, meta: dict[str, Any], data: bytes = b"") -> None:
        send(kind, ident, meta, data)
        if kind == "run" and not sent.is_set():
            sent.set()
            cancelled.wait(10)

    monkeypatch.setattr(session, "_send", send_then_hold)
    first = "import time\nfirst = 1\nprint('first', flush=True)\ntime.sleep(3)\nfirst = 2"
    events = session.stream(first, timeout=600, interrupt_if_abandoned=interrupt_if_abandoned)
    sending = asyncio.create_task(anext(events))
    assert await asyncio.to_thread(sent.wait, 10)
    sending.cancel()
    cancelled.set()
    with pytest.raises(asyncio.CancelledError):
        await sending

    # The cell runs all the same: the next one waits for its end (or its interrupt) and
    # gets none of its output.
    second = await asyncio.wait_for(session.run("print('second', globals().get('first'))"), 60)
    assert second.error is None, second.error
    if interrupt_if_abandoned:  # ended where the interrupt found it: before its end
        assert second.stdout in ("second None\n", "second 1\n")
    else:
        assert second.stdout == "second 2\n"


async def test_an_interrupted_infinite_loop_keeps_what_came_before(session: Session) -> None:
    await session.run("x = 'kept'")
    looped = await session.run("while True:\n    pass", timeout=1)
    after = await session.run("print(x)")

    assert looped.timed_out
    assert not looped.state_lost
    assert looped.error is not None
    assert looped.error.name == "KeyboardInterrupt"
    assert after.stdout == "kept\n"
    assert after.ok


async def test_a_cell_that_ignores_sigint_is_killed_and_the_next_cell_works(
    session: Session,
) -> None:
    await session.run("x = 'gone'")
    code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
    stuck = await session.run(code, timeout=3)  # its SIGINT comes after SIG_IGN is set
    after = await session.run("print(globals().get('x'))")

    assert stuck.timed_out
    assert stuck.state_lost
    assert stuck.reason is not None
    assert "did not stop" in stuck.reason
    assert after.stdout == "None\n"
    assert after.ok


async def test_running_out_of_memory_loses_the_state_and_the_session_goes_on(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(memory_bytes=160 * 1024 * 1024)
    async with (
        DockerSandbox(config, docker_client=docker_client) as sandbox,
        sandbox.session(limits=LIMITS) as session,
    ):
        await session.run("x = 1")
        hog = await session.run("blocks = [bytearray(16 << 20) for _ in range(64)]")
        after = await session.run("print(globals().get('x'), 'alive')")

    assert hog.state_lost
    assert hog.reason is not None
    assert "out of memory" in hog.reason
    assert after.stdout == "None alive\n"


async def test_output_is_streamed_while_the_cell_runs(session: Session) -> None:
    # The cell can only finish once the host has seen its first line and answered.
    code = """
import os, time
print("waiting", flush=True)
while not os.path.exists("go"):
    time.sleep(0.02)
print("done")
"""
    events: list[OutputEvent | DisplayOutput | CellResult] = []
    async for event in session.stream(code):
        events.append(event)
        if event == OutputEvent(stream="stdout", text="waiting\n"):
            await session.put_file("go", b"")

    *outputs, result = events
    assert outputs == [
        OutputEvent(stream="stdout", text="waiting\n"),
        OutputEvent(stream="stdout", text="done\n"),
    ]
    assert isinstance(result, CellResult)
    assert result.stdout == "waiting\ndone\n"


async def test_on_output_sees_stdout_and_stderr(session: Session) -> None:
    seen: list[OutputEvent] = []
    result = await session.run(
        "import sys\nprint('out')\nprint('err', file=sys.stderr)", on_output=seen.append
    )

    assert OutputEvent(stream="stdout", text="out\n") in seen
    assert OutputEvent(stream="stderr", text="err\n") in seen
    assert (result.stdout, result.stderr) == ("out\n", "err\n")


async def test_output_arrives_in_whole_lines_and_flushed_text_at_once(session: Session) -> None:
    # print writes each argument and its end apart; an argument slow to turn into text
    # leaves the host time to read what came before it, unless lines are kept whole.
    code = """
import os, sys, time
class Slow:
    def __str__(self):
        time.sleep(0.1)
        return "slow"
for number in range(3):
    print(number, Slow())
    print(number, Slow(), file=sys.stderr)
print("partial", end="", flush=True)
while not os.path.exists("go"):  # the rest of the line waits until "partial" was told
    time.sleep(0.02)
print(" line")
"""
    seen: list[OutputEvent] = []
    results: list[CellResult] = []
    async for event in session.stream(code):
        if isinstance(event, OutputEvent):
            seen.append(event)
            if event.stream == "stdout" and event.text.endswith("partial"):
                await session.put_file("go", b"")
        elif isinstance(event, CellResult):
            results.append(event)
    [result] = results

    lines = "".join(f"{number} slow\n" for number in range(3))
    assert (result.stdout, result.stderr) == (lines + "partial line\n", lines)
    stdout = [event.text for event in seen if event.stream == "stdout"]
    assert stdout[-1] == " line\n"
    assert stdout[-2].endswith("partial")  # flushed without a newline: told before it
    assert all(text.endswith("\n") for text in stdout[:-2])
    assert all(event.text.endswith("\n") for event in seen if event.stream == "stderr")


async def test_standard_streams_set_to_anything_do_not_end_the_session(session: Session) -> None:
    # The driver flushes all four at the end of a cell, whatever the cell left there.
    broken = await session.run(
        "import sys\nx = 1\nsys.stdout = 42\nsys.__stdout__ = None\nsys.stderr = object()"
    )
    mended = await session.run(
        "import io, sys\n"
        "sys.stdout = io.TextIOWrapper(io.FileIO(1, 'w', closefd=False), line_buffering=True)\n"
        "print('back', x)"
    )

    assert (broken.error, broken.state_lost) == (None, False)
    assert (mended.error, mended.state_lost, mended.stdout) == (None, False, "back 1\n")


async def test_interrupt_stops_the_running_cell_and_keeps_the_state(session: Session) -> None:
    await session.run("x = 5")
    code = "import time\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.01)"
    events = []
    async for event in session.stream(code):
        events.append(event)
        if isinstance(event, OutputEvent):
            await session.interrupt()
    result = events[-1]
    after = await session.run("x")

    assert isinstance(result, CellResult)
    assert result.error is not None
    assert result.error.name == "KeyboardInterrupt"
    assert not result.timed_out
    assert not result.state_lost
    assert after.outputs[0].data["text/plain"] == "5"


async def test_output_beyond_the_cap_is_dropped_and_flagged(
    docker_client: docker.DockerClient,
) -> None:
    config = SandboxConfig(max_output_bytes=1000)
    async with (
        DockerSandbox(config, docker_client=docker_client) as sandbox,
        sandbox.session(limits=LIMITS) as session,
    ):
        result = await session.run("print('x' * 100_000)\nprint('y' * 100_000)")

    assert result.stdout_truncated
    assert result.stdout == "x" * 1000


async def test_restart_forgets_variables_and_keeps_files(session: Session) -> None:
    await session.run("x = 1\nopen('kept.txt', 'w').write('still here')")
    await session.restart()
    after = await session.run("print(globals().get('x'), open('kept.txt').read())")

    assert after.stdout == "None still here\n"
    assert after.execution_count == 1


async def test_files_go_in_and_come_back(session: Session, tmp_path: Path) -> None:
    folder = tmp_path / "data"
    (folder / "inner").mkdir(parents=True)
    (folder / "inner" / "b.txt").write_text("bee")
    (folder / "a.txt").write_text("ay")
    await session.put_file("notes.txt", b"hello")
    await session.put_file("data", folder)
    made = await session.run("open('out.bin', 'wb').write(bytes(range(256)))")

    assert made.ok
    assert await session.get_file("notes.txt") == b"hello"
    assert await session.get_file("data/inner/b.txt") == b"bee"
    assert await session.get_file("out.bin") == bytes(range(256))
    names = {(entry.name, entry.kind) for entry in await session.list_files()}
    assert {("notes.txt", "file"), ("data", "folder"), ("out.bin", "file")} <= names
    assert [entry.name for entry in await session.list_files("data")] == ["a.txt", "inner"]


async def test_file_requests_never_follow_a_link(session: Session) -> None:
    await session.run(
        "import os\nos.symlink('/etc/passwd', 'passwd')\nos.symlink('/etc', 'etc')\n"
        "open('big', 'wb').write(b'x' * 5000)"
    )

    with pytest.raises(SessionFileError, match="link"):
        await session.get_file("passwd")
    with pytest.raises(SessionFileError, match="not a folder"):
        await session.get_file("etc/passwd")
    with pytest.raises(SessionFileError, match="link"):
        await session.put_file("passwd", b"overwritten?")
    with pytest.raises(SessionFileError, match="more than"):
        await session.get_file("big", max_bytes=100)
    with pytest.raises(SessionFileError):
        await session.get_file("missing.txt")
    kinds = {entry.name: entry.kind for entry in await session.list_files()}
    assert kinds["passwd"] == kinds["etc"] == "link"


async def test_a_closed_session_refuses_cells_and_leaves_no_container(
    sandbox: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    session = await sandbox.session(limits=LIMITS).start()
    assert len(our_containers(docker_client)) == 1
    await session.close()

    assert our_containers(docker_client) == []
    with pytest.raises(SessionClosedError):
        await session.run("print(1)")


async def test_the_number_of_sessions_of_a_process_is_capped(sandbox: DockerSandbox) -> None:
    one = SessionLimits(max_sessions=1)
    async with sandbox.session(limits=one) as first:
        with pytest.raises(SessionLimitError, match="limit"):
            await sandbox.session(limits=one).start()
        result = await first.run("print('still fine')")

    assert result.stdout == "still fine\n"


async def test_two_sessions_do_not_share_state(sandbox: DockerSandbox) -> None:
    async with sandbox.session(limits=LIMITS) as first, sandbox.session(limits=LIMITS) as second:
        await asyncio.gather(first.run("x = 'first'"), second.run("x = 'second'"))
        results = await asyncio.gather(first.run("print(x)"), second.run("print(x)"))

    assert [result.stdout for result in results] == ["first\n", "second\n"]


def test_the_sync_twin_keeps_state(docker_client: docker.DockerClient) -> None:
    with (
        DockerSandbox(docker_client=docker_client) as sandbox,
        SyncSession(sandbox.session(limits=LIMITS)) as session,
    ):
        session.run("x = 2")
        result = session.run("print(x * 21)")
        session.put_file("f.txt", b"sync")
        data = session.get_file("f.txt")

    assert result.stdout == "42\n"
    assert data == b"sync"


async def test_a_pool_hands_out_started_sessions_and_starts_new_ones(
    sandbox: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    async with SessionPool(lambda: sandbox.session(limits=LIMITS), size=1) as pool:
        waiting = our_containers(docker_client)
        first = await pool.take()
        second = await pool.take()
        try:
            await first.run("x = 'first'")
            results = [
                await session.run("print(globals().get('x'))") for session in (first, second)
            ]
        finally:
            await first.close()
            await second.close()

    assert len(waiting) == 1
    assert first.container_name != second.container_name
    assert [result.stdout for result in results] == ["first\n", "None\n"]
    assert our_containers(docker_client) == []


async def test_restart_ends_a_running_cell_at_once(session: Session) -> None:
    await session.run("x = 1")
    running = asyncio.ensure_future(session.run("import time\ntime.sleep(60)", timeout=120))
    await asyncio.sleep(1)
    await session.restart()
    ended = await running
    after = await session.run("print(globals().get('x'))")

    assert ended.state_lost
    assert ended.reason == "the session was restarted"
    assert not ended.timed_out
    assert after.stdout == "None\n"
