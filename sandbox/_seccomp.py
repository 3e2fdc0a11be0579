"""sandcrew's own seccomp profile: an allowlist of what Python and bash programs need.

Docker's default profile allows io_uring (before engine 25) and, with the
capabilities it grants, more than a program of ours needs. This profile denies
everything with EPERM except the system calls below. Left out on purpose,
among others: ``io_uring_*`` (a large kernel surface), ``ptrace``,
``process_vm_readv/writev``, ``process_madvise``, ``pidfd_getfd``, ``kcmp``
(reading or steering another process), ``bpf``, ``perf_event_open``,
``userfaultfd`` (exploit helpers), ``keyctl``/``add_key``/``request_key``
(kernel keyrings are not namespaced), the mount family and ``chroot``,
``unshare``/``setns`` (new namespaces), ``kexec_*``, module loading,
``reboot``, ``swapon``, clock setting, ``open_by_handle_at`` and
``name_to_handle_at`` (escapes by file handle), NUMA policy calls, ``iopl``,
``ioperm`` and ``modify_ldt``, ``syslog`` and ``acct``.

``clone`` is allowed only without namespace flags (as in Docker's default),
``clone3`` fails with ENOSYS so the C library falls back to ``clone``, and
``personality`` only accepts the harmless personas. Only the native ABIs of
x86-64 and AArch64 are listed: 32-bit system calls are refused. Names the
engine's libseccomp does not know are skipped by the runtime.

The supervisor (see :mod:`._supervisor`) needs ``setresuid``, ``setresgid``,
``setgroups``, ``capset`` and ``prctl`` to drop to the run's uid; the program
gets them too, which is harmless without capabilities.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

PROFILE_NAME = "sandcrew"
"""The setting value that selects this profile."""

ENGINE_DEFAULT = "engine-default"
"""The setting value that keeps the engine's own default profile."""

_EPERM = 1
_ENOSYS = 38
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_CLONE_NAMESPACE_FLAGS = 0x7E020000
_AF_VSOCK = 40
# PER_LINUX, PER_LINUX32, UNAME26, UNAME26 | PER_LINUX32, and the query value.
_HARMLESS_PERSONAS = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)

ALLOWED_SYSCALLS: tuple[str, ...] = (
    # files and directories
    "access", "chdir", "chmod", "chown", "close", "close_range", "copy_file_range", "creat",
    "dup", "dup2", "dup3", "faccessat", "faccessat2", "fadvise64", "fallocate", "fchdir",
    "fchmod", "fchmodat", "fchmodat2", "fchown", "fchownat", "fcntl", "fdatasync", "fgetxattr",
    "flistxattr", "flock", "fremovexattr", "fsetxattr", "fstat", "fstatfs", "fsync",
    "ftruncate", "futimesat", "getcwd", "getdents", "getdents64", "getxattr", "getxattrat",
    "lchown", "lgetxattr", "link", "linkat", "listxattr", "listxattrat", "llistxattr",
    "lremovexattr", "lseek", "lsetxattr", "lstat", "mkdir", "mkdirat", "mknod", "mknodat",
    "newfstatat", "open", "openat", "openat2", "pread64", "preadv", "preadv2", "pwrite64",
    "pwritev", "pwritev2", "read", "readahead", "readlink", "readlinkat", "readv", "removexattr",
    "removexattrat", "rename", "renameat", "renameat2", "rmdir", "sendfile", "setxattr",
    "setxattrat", "splice", "stat", "statfs", "statx", "symlink", "symlinkat", "sync",
    "sync_file_range", "syncfs", "tee", "truncate", "umask", "unlink", "unlinkat", "utime",
    "utimensat", "utimes", "vmsplice", "write", "writev",
    # events, polling and pipes
    "epoll_create", "epoll_create1", "epoll_ctl", "epoll_pwait", "epoll_pwait2", "epoll_wait",
    "eventfd", "eventfd2", "inotify_add_watch", "inotify_init", "inotify_init1",
    "inotify_rm_watch", "pipe", "pipe2", "poll", "ppoll", "pselect6", "select", "signalfd",
    "signalfd4", "timerfd_create", "timerfd_gettime", "timerfd_settime",
    # asynchronous file I/O of the old kind (not io_uring)
    "io_cancel", "io_destroy", "io_getevents", "io_pgetevents", "io_setup", "io_submit",
    # memory
    "brk", "cachestat", "get_mempolicy", "madvise", "map_shadow_stack", "membarrier",
    "memfd_create", "mincore", "mlock", "mlock2", "mlockall", "mmap", "mprotect", "mremap",
    "mseal", "msync", "munlock", "munlockall", "munmap", "pkey_alloc", "pkey_free",
    "pkey_mprotect", "remap_file_pages",
    # processes, threads and identity
    "arch_prctl", "capget", "capset", "execve", "execveat", "exit", "exit_group", "fork",
    "get_robust_list", "get_thread_area", "getcpu", "getegid", "geteuid", "getgid",
    "getgroups", "getpgid", "getpgrp", "getpid", "getppid", "getpriority", "getresgid",
    "getresuid", "getrlimit", "getrusage", "getsid", "gettid", "getuid", "ioprio_get",
    "ioprio_set", "kill", "pidfd_open", "pidfd_send_signal", "prctl", "prlimit64",
    "process_mrelease", "rseq", "sched_get_priority_max", "sched_get_priority_min",
    "sched_getaffinity", "sched_getattr", "sched_getparam", "sched_getscheduler",
    "sched_rr_get_interval", "sched_setaffinity", "sched_setattr", "sched_setparam",
    "sched_setscheduler", "sched_yield", "seccomp", "set_robust_list", "set_thread_area",
    "set_tid_address", "setfsgid", "setfsuid", "setgid", "setgroups", "setpgid",
    "setpriority", "setregid", "setresgid", "setresuid", "setreuid", "setrlimit", "setsid",
    "setuid", "tgkill", "tkill", "vfork", "wait4", "waitid",
    "landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self",
    # signals
    "pause", "restart_syscall", "rt_sigaction", "rt_sigpending", "rt_sigprocmask",
    "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
    "rt_tgsigqueueinfo", "sigaltstack",
    # time (reading it, and timers)
    "alarm", "clock_getres", "clock_gettime", "clock_nanosleep", "getitimer", "gettimeofday",
    "nanosleep", "setitimer", "time", "timer_create", "timer_delete", "timer_getoverrun",
    "timer_gettime", "timer_settime", "times",
    # futexes
    "futex", "futex_requeue", "futex_wait", "futex_waitv", "futex_wake",
    # sockets (the network namespace decides what they reach)
    "accept", "accept4", "bind", "connect", "getpeername", "getsockname", "getsockopt",
    "listen", "recvfrom", "recvmmsg", "recvmsg", "sendmmsg", "sendmsg", "sendto",
    "setsockopt", "shutdown", "socketpair",
    # System V and POSIX IPC (namespaced per container)
    "mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive", "mq_timedsend", "mq_unlink",
    "msgctl", "msgget", "msgrcv", "msgsnd", "semctl", "semget", "semop", "semtimedop",
    "shmat", "shmctl", "shmdt", "shmget",
    # system information and randomness
    "getrandom", "ioctl", "sysinfo", "uname",
)  # fmt: skip

DENIED_SYSCALLS: tuple[str, ...] = (
    "io_uring_setup", "io_uring_enter", "io_uring_register", "ptrace", "process_vm_readv",
    "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp", "bpf", "perf_event_open",
    "userfaultfd", "keyctl", "add_key", "request_key", "mount", "umount2", "pivot_root",
    "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "chroot", "unshare", "setns", "kexec_load", "kexec_file_load", "init_module",
    "finit_module", "delete_module", "reboot", "swapon", "swapoff", "settimeofday",
    "clock_settime", "clock_adjtime", "adjtimex", "open_by_handle_at", "name_to_handle_at",
    "mbind", "set_mempolicy", "migrate_pages", "move_pages", "iopl", "ioperm", "modify_ldt",
    "syslog", "acct", "sethostname", "setdomainname", "quotactl", "lookup_dcookie",
    "fanotify_init", "memfd_secret", "uselib", "vhangup",
)  # fmt: skip
"""Never allowed; listed so that a test can prove no name slips into the allowlist."""


@cache
def seccomp_profile() -> dict[str, Any]:
    """The profile in the JSON form the engine takes (``security_opt`` ``seccomp=…``)."""
    if set(ALLOWED_SYSCALLS) & set(DENIED_SYSCALLS):
        raise AssertionError("a denied system call is in the allowlist")
    rules: list[dict[str, Any]] = [
        {"names": sorted(ALLOWED_SYSCALLS), "action": "SCMP_ACT_ALLOW"},
        {
            "names": ["clone"],
            "action": "SCMP_ACT_ALLOW",
            "args": [
                {
                    "index": 0,
                    "value": _CLONE_NAMESPACE_FLAGS,
                    "valueTwo": 0,
                    "op": "SCMP_CMP_MASKED_EQ",
                }
            ],
        },
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": _ENOSYS},
        {
            "names": ["socket"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 0, "value": _AF_VSOCK, "valueTwo": 0, "op": "SCMP_CMP_NE"}],
        },
    ]
    rules.extend(
        {
            "names": ["personality"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 0, "value": persona, "valueTwo": 0, "op": "SCMP_CMP_EQ"}],
        }
        for persona in _HARMLESS_PERSONAS
    )
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": _EPERM,
        "archMap": [
            {"architecture": "SCMP_ARCH_X86_64", "subArchitectures": []},
            {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": []},
        ],
        "syscalls": rules,
    }


@cache
def profile_json() -> str:
    return json.dumps(seccomp_profile(), separators=(",", ":"), sort_keys=True)


def seccomp_security_option(setting: str) -> str | None:
    """The ``security_opt`` entry for a ``SandboxConfig.seccomp_profile`` value.

    ``"sandcrew"``: this profile; ``"engine-default"``: none (the engine's own);
    anything else is the path of a profile file in the engine's JSON format.
    """
    if setting == PROFILE_NAME:
        return f"seccomp={profile_json()}"
    if setting == ENGINE_DEFAULT:
        return None
    with open(setting, encoding="utf-8") as handle:
        return f"seccomp={json.dumps(json.load(handle), separators=(',', ':'))}"


def describe_seccomp_profile(setting: str) -> str:
    """One line for ``sandcrew doctor``: which profile runs use."""
    if setting == PROFILE_NAME:
        return f"sandcrew's own allowlist ({len(ALLOWED_SYSCALLS)} system calls)"
    if setting == ENGINE_DEFAULT:
        return "the engine's default profile"
    return f"the profile in {setting}"
