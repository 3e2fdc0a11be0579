"""Golden tests of the server's own encoders (no Docker): the exact bytes, and the SDK's
own parsers reading them back."""

from __future__ import annotations

import json
import struct

import pytest
from e2b.envd.filesystem import filesystem_pb
from e2b.envd.process import process_pb
from e2b_code_interpreter.models import Execution, parse_output

from sandcrew.e2b._connect import (
    Code,
    ConnectError,
    end_of_stream,
    envelope,
    first_message,
    timeout_seconds,
)
from sandcrew.e2b._envd import command_of, end_event, entry_info
from sandcrew.e2b._execute import encode_event
from sandcrew.sandbox import (
    CellError,
    CellResult,
    CommandResult,
    DisplayOutput,
    FileEntry,
    OutputEvent,
)

PNG = b"\x89PNG\r\n\x1a\nfake"


def clock() -> int:
    return 1_700_000_000_000_000_000


def test_output_lines() -> None:
    assert encode_event(OutputEvent(stream="stdout", text="hé\n"), clock=clock) == (
        '{"type":"stdout","text":"hé\\n","timestamp":1700000000000000000}\n'.encode()
    )
    assert encode_event(OutputEvent(stream="stderr", text="x"), clock=clock) == (
        b'{"type":"stderr","text":"x","timestamp":1700000000000000000}\n'
    )


def test_a_result_line_names_each_mime_type() -> None:
    output = DisplayOutput(
        kind="result",
        data={
            "text/plain": "<Figure>",
            "image/png": PNG,
            "text/html": "<b>x</b>",
            "application/json": '{"a": 1}',
            "application/vnd.custom": "raw",
        },
    )
    assert json.loads(encode_event(output)) == {
        "type": "result",
        "text": "<Figure>",
        "png": "iVBORw0KGgpmYWtl",
        "html": "<b>x</b>",
        "json": {"a": 1},
        "extra": {"application/vnd.custom": "raw"},
        "is_main_result": True,
    }
    shown = DisplayOutput(kind="display", data={"image/svg+xml": "<svg/>"})
    assert json.loads(encode_event(shown)) == {
        "type": "result",
        "svg": "<svg/>",
        "is_main_result": False,
    }


def test_the_closing_lines_of_a_failed_cell() -> None:
    result = CellResult(
        error=CellError(name="ValueError", value="bad", traceback="Traceback…"),
        execution_count=7,
        stdout_truncated=True,
    )
    assert encode_event(result, clock=clock).decode().splitlines() == [
        '{"type":"stderr","text":"[output truncated by the sandbox]\\n",'
        '"timestamp":1700000000000000000}',
        '{"type":"error","name":"ValueError","value":"bad","traceback":"Traceback…"}',
        '{"type":"number_of_executions","execution_count":7}',
    ]


def test_a_cell_the_server_timed_out_is_an_error() -> None:
    lines = encode_event(CellResult(timed_out=True, execution_count=2)).splitlines()
    assert json.loads(lines[0])["name"] == "TimeoutError"


def test_the_sdk_reads_the_lines_back() -> None:
    execution = Execution()
    events = [
        OutputEvent(stream="stdout", text="one\n"),
        DisplayOutput(kind="display", data={"image/png": PNG, "text/plain": "<fig>"}),
        DisplayOutput(kind="result", data={"text/plain": "42"}),
        CellResult(execution_count=3),
    ]
    for event in events:
        for line in encode_event(event).decode().splitlines():
            parse_output(execution, line)
    assert execution.logs.stdout == ["one\n"]
    assert execution.text == "42"
    assert execution.results[0].png == "iVBORw0KGgpmYWtl"
    assert execution.execution_count == 3
    assert execution.error is None


def test_envelopes_and_the_end_of_a_stream() -> None:
    assert envelope({"event": {"start": {"pid": 7}}}) == (
        struct.pack(">BI", 0, 29) + b'{"event":{"start":{"pid":7}}}'
    )
    assert end_of_stream() == b"\x02\x00\x00\x00\x02{}"
    failed = end_of_stream(ConnectError(Code.NOT_FOUND, "gone"))
    assert failed == struct.pack(">BI", 2, 47) + b'{"error":{"code":"not_found","message":"gone"}}'


def test_the_sdk_reads_the_process_events_back() -> None:
    start = process_pb.StartResponse.from_json(envelope({"event": {"start": {"pid": 7}}})[5:])
    assert start.event is not None
    assert start.event.event is not None
    assert start.event.event.value.pid == 7
    ended = CommandResult(id="c", exit_code=3, stdout="", stderr="")
    end = process_pb.StartResponse.from_json(
        json.dumps({"event": {"end": end_event(ended)}}).encode()
    )
    assert end.event is not None
    assert end.event.event is not None
    assert end.event.event.value.exit_code == 3
    assert end.event.event.value.status == "exit status 3"


def test_entry_info_is_envds() -> None:
    entry = FileEntry(name="a.txt", kind="file", size=5, mode=0o644, modified=1_700_000_000.5)
    info = entry_info(entry, "/home/user/a.txt")
    assert info == {
        "name": "a.txt",
        "type": "FILE_TYPE_FILE",
        "path": "/home/user/a.txt",
        "size": "5",
        "mode": 0o644,
        "permissions": "-rw-r--r--",
        "owner": "user",
        "group": "user",
        "modifiedTime": "2023-11-14T22:13:20.500000Z",
    }
    parsed = filesystem_pb.EntryInfo.from_json(json.dumps(info).encode())
    assert parsed.size == 5
    assert parsed.type == filesystem_pb.FileType.FILE
    folder = entry_info(FileEntry(name="d", kind="folder", size=0, mode=0o755), "/home/user/d")
    assert folder["permissions"] == "drwxr-xr-x"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"", Code.INVALID_ARGUMENT),
        (b"\x00\x00\x00\x00", Code.INVALID_ARGUMENT),
        (struct.pack(">BI", 0, 3) + b"{}", Code.INVALID_ARGUMENT),
        (struct.pack(">BI", 0, 2) + b"{}extra", Code.INVALID_ARGUMENT),
        (struct.pack(">BI", 1, 2) + b"{}", Code.INVALID_ARGUMENT),
        (struct.pack(">BI", 2, 2) + b"{}", Code.INVALID_ARGUMENT),
        (struct.pack(">BI", 0, 1 << 30), Code.RESOURCE_EXHAUSTED),
        (struct.pack(">BI", 0, 4) + b"null", Code.INVALID_ARGUMENT),
        (struct.pack(">BI", 0, 2) + b"\xff\xfe", Code.INVALID_ARGUMENT),
        (struct.pack(">BI", 0, 2000) + b"[" * 1000 + b"]" * 1000, Code.INVALID_ARGUMENT),
    ],
    ids=[
        "empty",
        "torn",
        "short",
        "trailing",
        "compressed",
        "end-flag",
        "oversized",
        "null",
        "not-utf8",
        "deeply-nested",
    ],
)
def test_hostile_request_envelopes(body: bytes, code: Code) -> None:
    with pytest.raises(ConnectError) as refused:
        first_message(body, max_bytes=1 << 20)
    assert refused.value.code is code


def test_the_sdks_start_request_is_read() -> None:
    request = process_pb.StartRequest(
        process=process_pb.ProcessConfig(
            cmd="/bin/bash", args=["-l", "-c", "ls -la"], envs={"A": "b"}, cwd="/home/user"
        )
    )
    payload = request.to_json().encode()
    message = first_message(struct.pack(">BI", 0, len(payload)) + payload, max_bytes=1 << 20)
    assert command_of(message["process"]) == "ls -la"
    assert command_of({"cmd": "python3", "args": ["-c", "print('a b')"]}) == (
        "python3 -c 'print('\"'\"'a b'\"'\"')'"
    )


def test_the_call_deadline() -> None:
    assert timeout_seconds("60000") == 60.0
    assert timeout_seconds(None) is None
    assert timeout_seconds("0") is None
    assert timeout_seconds("-5") is None
    assert timeout_seconds("9" * 40) is None
    # Digits of other scripts pass str.isdigit() but not int().
    for header in ("\u00b2", "\u0663"):
        assert timeout_seconds(header) is None
