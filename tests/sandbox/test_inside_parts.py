"""The pure parts of the in-container modules, run on the host.

Headers, frames, input-file names and unpacking, artifact collection and the
batch reaper's deletion work on plain bytes and a temporary folder; the rest
(privilege drop, killing) is covered on real Docker by the attack tests.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from sandcrew.sandbox import _languages
from sandcrew.sandbox._inside import runners
from sandcrew.sandbox._inside.batch import Request, task_outcome
from sandcrew.sandbox._inside.files import (
    OUTPUT_FOLDER,
    checked_name,
    collect_artifacts,
    json_text,
    pack_files,
    unpack_files,
    unpacked,
)
from sandcrew.sandbox._inside.framing import (
    OUTCOME_ALONE,
    OUTCOME_RESULT,
    artifacts_frame,
    batch_frame,
    parse_batch_head,
    status_trailer,
    trailer_mark,
)
from sandcrew.sandbox._inside.reaper import ipc_objects_of, owned_entries, remove_entry
from sandcrew.sandbox._inside.supervisor import Header
from sandcrew.sandbox._inside_command import inside_command
from tests.sandbox.helpers import carried_sources

NONCE = b"0123456789abcdef"
LATER = float("inf")  # never past: a deadline that does not depend on when a test runs


# Headers and requests


def test_a_header_is_read_field_by_field() -> None:
    header = Header(b"python 12 f00d 3000 9 40 1024 5")
    assert (header.language, header.size, header.nonce) == ("python", 12, "f00d")
    assert (header.limit_ms, header.watchdog, header.files_size) == (3000, 9, 40)
    assert (header.artifact_bytes, header.artifact_count) == (1024, 5)


@pytest.mark.parametrize(
    "line",
    [b"python 12 f00d 3000 9 40 1024", b"python x f00d 3000 9 40 1024 5", b"python -1 n 1 1 1 1 1"],
    ids=["a field short", "not a number", "negative size"],
)
def test_a_bad_header_is_refused(line: bytes) -> None:
    with pytest.raises(ValueError, match=r"8 fields|invalid literal|negative"):
        Header(line)


def test_a_batch_request_is_read_and_a_bad_one_refused() -> None:
    request = Request(b"abc123 bash 40 2500 1000")
    assert (request.identifier, request.language, request.size) == ("abc123", "bash", 40)
    assert (request.limit, request.output_limit) == (2.5, 1000)
    for bad in (b"abc bash 40 2500", b"a/b bash 40 2500 1000", b"abc bash -4 2500 1000"):
        with pytest.raises(ValueError, match=r"5 fields|bad request"):
            Request(bad)


# Frames


def test_a_status_trailer_says_status_and_timeout_after_the_mark() -> None:
    mark = trailer_mark("f00d")
    assert status_trailer(mark, 3, timed_out=False) == b"\x1ef00d:3\n"
    assert status_trailer(mark, 137, timed_out=True) == b"\x1ef00d:T137\n"
    assert artifacts_frame(mark, b'{"files": []}\n') == b'\x1ef00d:A14\n{"files": []}\n'


def test_a_batch_frame_reads_back_as_written() -> None:
    frame = batch_frame(
        NONCE, "abc", status=3, timed_out=True, out=b"out", err=b"error", err_cut=True
    )
    line, _, body = frame.partition(b"\n")
    head = parse_batch_head(NONCE, line)
    assert (head.identifier, head.outcome, head.status) == ("abc", OUTCOME_RESULT, 3)
    assert (head.timed_out, head.out_cut, head.err_cut) == (True, False, True)
    assert body[: head.out_size] == b"out"
    assert body[head.out_size : head.out_size + head.err_size] == b"error"


def test_a_frame_without_the_nonce_or_with_an_unknown_outcome_is_refused() -> None:
    with pytest.raises(ValueError, match="unframed"):
        parse_batch_head(NONCE, batch_frame(b"forged", "abc").partition(b"\n")[0])
    with pytest.raises(ValueError, match="unknown batch outcome"):
        parse_batch_head(NONCE, batch_frame(NONCE, "abc", outcome="pass").partition(b"\n")[0])


# A batch task's verdict


def test_a_task_times_out_when_it_ended_past_its_limit_whenever_that_was_seen() -> None:
    # Ended 1 ms after its start, seen 14 s later: no timeout.
    assert task_outcome(0, 100.001, 110.0, start_failed=False) == (OUTCOME_RESULT, 0, False)
    assert task_outcome(137, 110.2, 110.0, start_failed=False) == (OUTCOME_RESULT, 137, True)


def test_a_kill_before_the_deadline_or_a_failed_start_is_the_container_s_fault() -> None:
    assert task_outcome(137, 100.0, 110.0, start_failed=False)[0] == OUTCOME_ALONE
    assert task_outcome(125, 100.0, 110.0, start_failed=True)[0] == OUTCOME_ALONE
    assert task_outcome(125, 100.0, 110.0, start_failed=False) == (OUTCOME_RESULT, 125, False)


# Input files


@pytest.mark.parametrize(
    "name", ["", "/etc/passwd", "../up", "a/../../b", "a//b", "./a", "a\x00b", "a/"]
)
def test_an_input_file_name_that_could_leave_the_workdir_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="refused input file name"):
        checked_name(name)


def test_input_files_unpack_read_only_into_their_folders(tmp_path: Path) -> None:
    unpack_files(pack_files({"data.csv": b"1,2\n", "deep/er/notes.txt": b"hi"}), str(tmp_path))
    assert (tmp_path / "data.csv").read_bytes() == b"1,2\n"
    assert (tmp_path / "deep" / "er" / "notes.txt").read_bytes() == b"hi"
    assert stat.S_IMODE((tmp_path / "data.csv").stat().st_mode) == 0o444


def test_unpacking_never_writes_through_a_link_nor_over_a_file(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"kept")
    work = tmp_path / "work"
    work.mkdir()
    (work / "data.csv").symlink_to(victim)
    with pytest.raises(FileExistsError):
        unpack_files(pack_files({"data.csv": b"overwritten"}), str(work))
    assert victim.read_bytes() == b"kept"


def test_a_cut_or_hostile_file_blob_is_refused() -> None:
    packed = pack_files({"a.txt": b"0123456789"})
    with pytest.raises(ValueError, match="cut short"):
        unpacked(packed[:-1])
    forged = len(b"../a").to_bytes(4, "big") + (1).to_bytes(8, "big") + b"../a" + b"x"
    with pytest.raises(ValueError, match="refused input file name"):
        unpacked(forged)


# Artifacts


def _listing(frame: bytes) -> tuple[dict[str, object], bytes]:
    line, _, rest = frame.partition(b"\n")
    return json.loads(line), rest


def test_artifacts_are_regular_files_of_out_in_name_order(tmp_path: Path) -> None:
    out = tmp_path / OUTPUT_FOLDER
    (out / "sub").mkdir(parents=True)
    (out / "b.txt").write_bytes(b"bb")
    (out / "sub" / "a.txt").write_bytes(b"a")
    (out / "link").symlink_to(tmp_path / "secret")
    (tmp_path / "secret").write_bytes(b"not an artifact")
    (out / "bell\x07").write_bytes(b"x")
    listing, contents = _listing(collect_artifacts(str(tmp_path), 1 << 20, 10, LATER))
    assert listing["files"] == [{"name": "b.txt", "size": 2}, {"name": "sub/a.txt", "size": 1}]
    assert contents == b"bba"
    assert "link: a symbolic link" in listing["skipped"]  # type: ignore[operator]
    assert any("control characters" in line for line in listing["skipped"])  # type: ignore[attr-defined]


def test_artifacts_past_the_caps_or_the_time_are_left_out_and_said_so(tmp_path: Path) -> None:
    out = tmp_path / OUTPUT_FOLDER
    out.mkdir()
    for name in ("a", "b", "c"):
        (out / name).write_bytes(b"12345")
    listing, contents = _listing(collect_artifacts(str(tmp_path), 8, 10, LATER))
    assert (listing["files"], contents, listing["truncated"]) == (
        [{"name": "a", "size": 5}],
        b"12345",
        True,
    )
    late, _ = _listing(collect_artifacts(str(tmp_path), 1 << 20, 10, time.monotonic() - 1))
    assert late["files"] == []
    assert late["truncated"] is True


@pytest.mark.parametrize(
    "value",
    [
        "plain.txt",
        'quote " and backslash \\ and slash /',
        "".join(map(chr, range(32))) + "\x7f",
        "ünïcödé 名前 😀",
        "undecodable \udcff\udc80 bytes",
        {"files": [{"name": "a", "size": 0}], "skipped": [], "truncated": True},
        [False, 123456789012, ""],
    ],
)
def test_the_listing_encoder_writes_what_json_reads_back(value: object) -> None:
    assert json.loads(json_text(value)) == value


def test_no_output_folder_gives_an_empty_listing(tmp_path: Path) -> None:
    listing, contents = _listing(collect_artifacts(str(tmp_path), 1 << 20, 10, LATER))
    assert (listing, contents) == ({"files": [], "skipped": [], "truncated": False}, b"")


# The batch reaper's deletion and IPC listing


def _deep_tree(top: Path, depth: int) -> None:
    folder = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(depth):
            os.mkdir("d", dir_fd=folder)
            with open(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=folder), "wb") as f:
                f.write(b"x" * 10)
            below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=folder)
            os.close(folder)
            folder = below
            if level % 500 == 499:
                os.chmod(".", 0o500)  # its owner took away its own right to delete in it
    finally:
        os.close(folder)


def test_a_tree_deeper_than_the_recursion_limit_is_deleted(tmp_path: Path) -> None:
    (tmp_path / "task").mkdir()
    _deep_tree(tmp_path / "task", 1_500)
    (tmp_path / "link").symlink_to(tmp_path / "kept")
    (tmp_path / "kept").write_bytes(b"kept")
    remove_entry(str(tmp_path), "task", LATER)
    remove_entry(str(tmp_path), "link", LATER)
    assert sorted(os.listdir(tmp_path)) == ["kept"]


def test_deleting_stops_at_its_time_bound(tmp_path: Path) -> None:
    (tmp_path / "task").mkdir()
    _deep_tree(tmp_path / "task", 50)
    with pytest.raises(TimeoutError):
        remove_entry(str(tmp_path), "task", time.monotonic() - 1)


def test_deleting_a_folder_of_many_files_stops_at_its_time_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sandcrew.sandbox._inside.reaper as reaper

    (tmp_path / "task").mkdir()
    for number in range(3000):
        (tmp_path / "task" / str(number)).touch()
    readings = iter([0.0])  # the walk's first look at the clock; every later one is late

    class Clock:
        @staticmethod
        def monotonic() -> float:
            return next(readings, 10.0)

    monkeypatch.setattr(reaper, "time", Clock)
    with pytest.raises(TimeoutError):
        remove_entry(str(tmp_path), "task", 1.0)
    # It stopped within the folder: after 1,024 files, not after all of them.
    assert len(os.listdir(tmp_path / "task")) == 3000 - 1024


def test_owned_entries_are_those_of_the_uid(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "link").symlink_to("/")
    assert sorted(owned_entries(str(tmp_path), os.getuid())) == ["link", "mine"]
    assert owned_entries(str(tmp_path), os.getuid() + 1) == []


def test_ipc_objects_are_found_by_owner_or_creator() -> None:
    shm = (
        "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid"
        "  cgid      atime      dtime      ctime                   rss                  swap\n"
        "         0         7   666               1048576    42    42      0 60001 60001 60001"
        " 60001          0          0 1700000000               1048576                     0\n"
        "         0         8   600                  4096    43    43      0 60002 60002 60001"
        " 60001          0          0 1700000000                  4096                     0\n"
        "         0         9   600                  4096    44    44      0 60003 60003 60003"
        " 60003          0          0 1700000000                  4096                     0\n"
    )
    assert ipc_objects_of(shm, 60001) == [7, 8]
    sem = "       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime\n"
    sem += "  12345678         3   600          1 60002 60002 60002 60002          0 1700000000\n"
    assert ipc_objects_of(sem, 60002) == [3]
    assert ipc_objects_of("", 60002) == []


# One table, one command


def test_the_host_and_the_container_read_one_runner_table() -> None:
    assert _languages.RUNNERS is runners.RUNNERS


def test_a_command_carries_its_entry_and_the_siblings_it_imports_only() -> None:
    supervisor = inside_command("supervisor", "/workspace", "1000", "1000")
    batch = inside_command("batch", "/workspace")
    assert supervisor[:4] == ["python3", "-I", "-S", "-c"]
    assert supervisor[5:] == ["/workspace", "1000", "1000"]
    folder = Path(runners.__file__).parent
    supervisor_sources, batch_sources = carried_sources(supervisor[4]), carried_sources(batch[4])
    for command, sources in ((supervisor, supervisor_sources), (batch, batch_sources)):
        assert len(command[4].encode()) < 128 * 1024
        for module in ("framing", "privileges", "reaper", "runners"):
            assert sources[module] == (folder / f"{module}.py").read_text(encoding="utf-8")
    assert "files" in supervisor_sources
    assert "batch" not in supervisor_sources
    assert "supervisor" not in batch_sources


def test_the_packed_sources_are_a_fraction_of_the_plain_ones() -> None:
    # The engine stores and hands on the command at each create and start.
    command = inside_command("supervisor", "/workspace", "1000", "1000")
    plain = sum(len(text.encode()) for text in carried_sources(command[4]).values())
    assert len(command[4].encode()) < plain / 2


def test_a_sibling_imported_as_a_name_of_the_package_travels_too() -> None:
    from sandcrew.sandbox._inside_command import _needed

    sources = {
        "entry": "from . import helper as h\nfrom .other import thing\n",
        "helper": "import os\n",
        "other": "thing = 1\n",
        "unrelated": "x = 1\n",
    }
    assert list(_needed("entry", sources)) == ["entry", "helper", "other"]
