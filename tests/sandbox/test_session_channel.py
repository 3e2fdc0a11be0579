"""The session's codecs (host <-> supervisor, supervisor <-> driver) and the supervisor's channel
check, on the host (no Docker), with hostile input."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from sandcrew.sandbox._inside.session_channel import (
    DISPLAY,
    DROPPED_DISPLAY,
    ERROR_TEXT_LIMIT,
    READY,
    RESULT,
    ChannelError,
    MessageReader,
    clean_display,
    clean_result,
    encode_message,
)
from sandcrew.sandbox._inside.session_integrity import channel_holders, tampering
from sandcrew.sandbox._inside.session_protocol import (
    END,
    FILE,
    OUT,
    RUN,
    FrameReader,
    ProtocolError,
    Request,
    RequestReader,
    command_output,
    encode_frame,
    encode_request,
    file_answer,
    json_object,
    read_command_output,
    read_file_answer,
)


def test_messages_come_whole_whatever_the_chunks() -> None:
    stream = encode_message(READY, {"count": 0}) + encode_message(RESULT, {"seq": 1, "count": 1})
    reader = MessageReader(limit=1024)

    got = [message for byte in stream for message in reader.feed(bytes([byte]))]

    assert got == [(READY, {"count": 0}), (RESULT, {"seq": 1, "count": 1})]


def test_a_display_over_the_limit_is_dropped_and_the_next_message_read() -> None:
    big = encode_message(DISPLAY, {"kind": "display", "data": {"text/plain": "x" * 5000}})
    after = encode_message(RESULT, {"seq": 3})
    reader = MessageReader(limit=1024)

    got = reader.feed(big[:2000]) + reader.feed(big[2000:] + after)

    assert got == [(DROPPED_DISPLAY, {"size": len(big) - 5}), (RESULT, {"seq": 3})]


@pytest.mark.parametrize(
    ("stream", "problem"),
    [
        (b"z" + (2).to_bytes(4, "big") + b"{}", "unknown message kind"),
        (RESULT + (5000).to_bytes(4, "big"), "a message of 5000 bytes"),
        (DISPLAY + (3).to_bytes(4, "big") + b"{x}", "not JSON"),
        (DISPLAY + (2).to_bytes(4, "big") + b"[]", "not a JSON object"),
        (DISPLAY + (1000).to_bytes(4, "big") + b"[" * 1000, "nested too deeply"),
    ],
    ids=["unknown-kind", "oversized-result", "torn-json", "not-an-object", "deeply-nested"],
)
def test_a_broken_message_is_a_channel_error(stream: bytes, problem: str) -> None:
    reader = MessageReader(limit=1024)
    with pytest.raises(ChannelError, match=problem):
        reader.feed(stream)


def test_only_flat_strings_of_a_display_pass() -> None:
    nested = json.loads("[" * 500 + "]" * 500)
    cleaned = clean_display(
        {
            "kind": "result",
            "data": {"text/plain": "7", "text/html": nested, "image/png": 3},
            "binary": ["image/png", "text/plain", {"x": 1}],
            "extra": nested,
        }
    )

    assert cleaned == {"kind": "result", "data": {"text/plain": "7"}, "binary": ["text/plain"]}
    assert clean_display({"data": "not a bundle"}) is None


def test_a_result_keeps_a_number_and_bounded_strings_only() -> None:
    nested = json.loads("[" * 500 + "]" * 500)
    cleaned = clean_result(
        {"count": True, "error": {"name": nested, "value": "v" * (ERROR_TEXT_LIMIT + 10)}}
    )

    assert cleaned["count"] is None
    assert cleaned["error"]["name"] == "Error"
    assert cleaned["error"]["value"].startswith("v" * ERROR_TEXT_LIMIT)
    assert cleaned["error"]["value"].endswith("[10 characters cut]")
    assert clean_result({"count": 4, "error": None}) == {"count": 4, "error": None}


def test_the_channel_check_finds_every_holder_of_the_sockets() -> None:
    ours, theirs = socket.socketpair()
    inode = os.fstat(theirs.fileno()).st_ino
    expected = {(os.getpid(), theirs.fileno(), inode)}
    try:
        alone = channel_holders(frozenset({inode}), [os.getpid()], os.getuid())
        copy = os.dup(theirs.fileno())
        try:
            doubled = channel_holders(frozenset({inode}), [os.getpid()], os.getuid())
        finally:
            os.close(copy)
    finally:
        ours.close()
        theirs.close()

    assert alone == expected
    assert tampering(expected, alone) is None
    assert doubled == expected | {(os.getpid(), copy, inode)}
    assert f"fd {copy}" in str(tampering(expected, doubled))
    assert "no longer its channel" in str(tampering(expected, set()))


# -- the host <-> supervisor protocol --------------------------------------------------

NONCE = b"0123456789abcdef"


def test_requests_come_whole_whatever_the_chunks() -> None:
    stream = encode_request(RUN, "7", {"limit_ms": 1000}, b"print(1)") + encode_request(
        FILE, "ab12", {"op": "get", "path": "a.txt", "max_bytes": 10}
    )
    reader = RequestReader(max_data=1024)

    got = [request for byte in stream for request in reader.feed(bytes([byte]))]

    assert got == [
        Request(RUN, "7", {"limit_ms": 1000}, b"print(1)"),
        Request(FILE, "ab12", {"op": "get", "path": "a.txt", "max_bytes": 10}),
    ]


@pytest.mark.parametrize(
    ("stream", "problem"),
    [
        (b"explode 1 2 0\n{}", "unknown request kind"),
        (b"run 1 2\n{}", "unreadable request header"),
        (b"run 1 2 999999\n{}", "a request of"),
        (b"run " + b"9" * 300, "does not end"),
        (b"run 1 4 0\n[[]]", "not a JSON object"),
        (b"run 1 1000 0\n" + b"[" * 1000, "nested too deeply"),
    ],
    ids=["unknown-kind", "torn-header", "oversized", "endless-header", "not-object", "nested"],
)
def test_a_broken_request_is_a_protocol_error(stream: bytes, problem: str) -> None:
    with pytest.raises(ProtocolError, match=problem):
        RequestReader(max_data=1024).feed(stream)


def test_frames_come_whole_and_carry_any_bytes() -> None:
    stream = encode_frame(NONCE, OUT, b"\x1e" + NONCE + b" fake 1\n") + encode_frame(
        NONCE, END, b'{"seq": 1}'
    )
    reader = FrameReader(NONCE, max_frame=1024)

    got = reader.feed(stream[:7]) + reader.feed(stream[7:])

    assert got == [(OUT, b"\x1e" + NONCE + b" fake 1\n"), (END, b'{"seq": 1}')]


@pytest.mark.parametrize(
    ("stream", "problem"),
    [
        (encode_frame(b"fedcba9876543210", OUT, b"x"), "outside the supervisor's frames"),
        (b"plain text", "outside the supervisor's frames"),
        (b"\x1e" + NONCE + b" bogus 1\nx", "unknown frame kind"),
        (b"\x1e" + NONCE + b" out 99999\n", "a frame of 99999 bytes"),
        (b"\x1e" + NONCE + b" out x\n", "unreadable frame header"),
        (b"\x1e" + NONCE + b" out " + b"1" * 200, "does not end"),
    ],
    ids=["wrong-nonce", "no-frame", "unknown-kind", "oversized", "torn", "endless-header"],
)
def test_a_broken_frame_is_a_protocol_error(stream: bytes, problem: str) -> None:
    with pytest.raises(ProtocolError, match=problem):
        FrameReader(NONCE, max_frame=1024).feed(stream)


def test_a_deeply_nested_payload_reads_as_no_object() -> None:
    with pytest.raises(ProtocolError, match="nested too deeply"):
        json_object(b"[" * 100_000)
    assert read_command_output(command_output("c1", "err", b"\xff")) == ("c1", "err", b"\xff")
    assert read_file_answer(file_answer("f1", {"size": 2}, b"ok")) == ("f1", {"size": 2}, b"ok")
    with pytest.raises(ProtocolError, match="unknown stream"):
        read_command_output(b"c1 tty\nx")


def test_the_channel_check_passes_over_a_zombie_and_not_over_a_hidden_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A zombie's fd folder cannot be read (it has no memory to be dumpable) and it holds
    # nothing; a live process whose folder cannot be read may hold anything.
    uid = os.getuid()
    for pid, state in ((7, "Z (zombie)"), (8, "S (sleeping)")):
        (tmp_path / str(pid) / "task" / str(pid) / "fd").mkdir(parents=True)
        (tmp_path / str(pid) / "status").write_text(
            f"Name:\tpython3\nState:\t{state}\nPid:\t{pid}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n"
        )
    listdir = os.listdir

    def unreadable_fd_folders(path: str) -> list[str]:
        if str(path).endswith("/fd"):
            raise PermissionError(13, "Permission denied", path)
        return listdir(path)

    monkeypatch.setattr(os, "listdir", unreadable_fd_folders)

    assert channel_holders(frozenset({1}), [7], uid, proc=str(tmp_path)) == set()
    with pytest.raises(PermissionError):
        channel_holders(frozenset({1}), [7, 8], uid, proc=str(tmp_path))
