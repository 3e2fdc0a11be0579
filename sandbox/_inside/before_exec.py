"""What a supervisor's child does to itself before it execs a program or an interpreter."""

import fcntl
import os


def raise_oom_score() -> None:
    """First to go when memory runs out: the kernel's OOM killer takes this process (the
    program, the interpreter, a command), never the supervisor."""
    with open("/proc/self/oom_score_adj", "w", encoding="ascii") as adjustment:
        adjustment.write("1000")


def move_descriptors(targets: dict[int, int]) -> None:
    """Make each target descriptor (all below 10) an inheritable copy of its source.

    Every source is copied above 10 first: a source may sit on another one's target
    number (the same source may serve several targets). The copies are closed after.
    """
    copies = {target: fcntl.fcntl(source, fcntl.F_DUPFD, 10) for target, source in targets.items()}
    for target, copy in copies.items():
        os.dup2(copy, target)
    for copy in copies.values():
        os.close(copy)
