"""What the supervisors print on the channel no program can write, and how it is framed.

Every frame starts with :data:`FRAME_START` and the run's nonce, which only the
supervisor and the host know (it arrives on stdin, never in argv or the
environment), so a program that prints on the same stream cannot forge one.

- The one-program supervisor acknowledges the program with :data:`ACKNOWLEDGEMENT`,
  may send the artifacts frame (``mark + "A<length>\\n" + listing``) on stdout,
  and ends both streams with the status trailer (``mark + ["T"] + status + "\\n"``).
- The batch supervisor sends one result frame per task on its stdout
  (:func:`batch_frame`, read back with :func:`parse_batch_head`).
"""

import os

ACKNOWLEDGEMENT = b"."
"""Printed on stdout by the supervisor once it has the program, before the program runs."""

FRAME_START = b"\x1e"  # ASCII record separator
ARTIFACTS_FRAME = b"A"
"""After the trailer mark on stdout, this byte starts the artifacts frame (a status is digits)."""
TIMED_OUT = b"T"
"""Before the status in a trailer: the run limit ended the program."""

OUTCOME_RESULT = "result"
"""A batch task ran: the frame holds its status and output."""
OUTCOME_ALONE = "alone"
"""A batch task met a fault of the container (could not start, killed for the shared memory):
its status says nothing of the program, so the host runs it again in a container of its own."""
OUTCOME_ELSEWHERE = "elsewhere"
"""A batch task was not started: the container retired itself (its cleanup failed), so the host
sends the task to another container."""
BATCH_OUTCOMES = (OUTCOME_RESULT, OUTCOME_ALONE, OUTCOME_ELSEWHERE)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` (``os.write`` may take fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def say(fd: int, data: bytes) -> None:
    """:func:`write_all`, for messages whose reader may be gone (nothing to do then)."""
    try:
        write_all(fd, data)
    except OSError:
        pass


def trailer_mark(nonce: str) -> bytes:
    """What every frame of a one-program run starts with."""
    return FRAME_START + nonce.encode() + b":"


def status_trailer(mark: bytes, status: int, *, timed_out: bool) -> bytes:
    """The last line of both streams: the program's exit status, vouched for by the nonce."""
    return mark + (TIMED_OUT if timed_out else b"") + str(status).encode() + b"\n"


def artifacts_frame(mark: bytes, listing: bytes) -> bytes:
    """The artifacts frame: the listing line and the files' bytes, with their length first."""
    return mark + ARTIFACTS_FRAME + str(len(listing)).encode() + b"\n" + listing


class BatchHead:
    """The first line of a batch result frame (after the nonce), parsed."""

    __slots__ = (
        "err_cut",
        "err_size",
        "identifier",
        "out_cut",
        "out_size",
        "outcome",
        "status",
        "timed_out",
    )

    def __init__(self, fields: list[bytes]) -> None:
        if len(fields) != 8:
            raise ValueError(f"a batch frame head has 8 fields (got {len(fields)})")
        self.identifier = fields[0].decode()
        self.outcome = fields[1].decode()
        if self.outcome not in BATCH_OUTCOMES:
            raise ValueError(f"unknown batch outcome {self.outcome!r}")
        self.status, timed_out, out_cut, err_cut, self.out_size, self.err_size = (
            int(field) for field in fields[2:]
        )
        self.timed_out, self.out_cut, self.err_cut = bool(timed_out), bool(out_cut), bool(err_cut)


def batch_frame(
    nonce: bytes,
    identifier: str,
    *,
    outcome: str = OUTCOME_RESULT,
    status: int = 0,
    timed_out: bool = False,
    out: bytes = b"",
    err: bytes = b"",
    out_cut: bool = False,
    err_cut: bool = False,
) -> bytes:
    """``"\\x1e<nonce> <id> <outcome> <status> <timed_out> <out_cut> <err_cut> <out_size>
    <err_size>\\n"`` then the task's stdout and stderr."""
    flags = (int(timed_out), int(out_cut), int(err_cut))
    head = f"{identifier} {outcome} {status} {flags[0]} {flags[1]} {flags[2]} {len(out)} {len(err)}"
    return FRAME_START + nonce + b" " + head.encode() + b"\n" + out + err


def parse_batch_head(nonce: bytes, line: bytes) -> BatchHead:
    """The head of a batch frame (``line`` without its newline); ValueError if it is not one."""
    mark = FRAME_START + nonce + b" "
    if not line.startswith(mark):
        raise ValueError("unframed output from the batch supervisor")
    return BatchHead(line[len(mark) :].split(b" "))
