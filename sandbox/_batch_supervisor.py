"""The batch supervisor: one hardened container runs many programs, each isolated from the rest.

It starts like the one-program supervisor of :mod:`._supervisor` (as root with
only SETUID, SETGID, SETPCAP and KILL, not dumpable) and then serves requests
on stdin until stdin closes: ``"<id> <language> <size> <limit_ms> <output_limit>\\n"``
followed by ``size`` bytes of program. Each program runs as a fresh process:

- **its own uid**, one per task and never reused in the container (drawn from
  the range given on the command line), with an empty capability set: it
  cannot signal, trace or read the supervisor (root, not dumpable) or another
  task (another uid), nor their files;
- **its own empty working directory**, ``<workdir>/<random>`` with mode 0700,
  made by the task's own process after it dropped to its uid (the workdir
  itself is root's, mode 1733: tasks may create in it but not list it), with
  ``HOME`` and ``TMPDIR`` pointing there; ``/tmp`` and ``/dev/shm`` are made
  unwritable (mode 0755, root's) before the first task, so nothing written
  outside the task's directory survives it;
- **its own limits**: wall time (the supervisor's clock), ``RLIMIT_AS``
  (address space: the container's cgroup is shared, and a per-task cgroup
  needs privileges the container does not have), ``RLIMIT_NPROC`` (per uid, so
  per task), and the output kept (the rest is read and dropped);
- **nothing of it survives its end**: when its main process ends or its time is
  up, a reaper process drops to the task's uid and sends ``kill(-1, SIGKILL)``
  until no process of that uid is left (the kernel's own "every process I may
  signal", which for a uid of its own is exactly the task), then deletes what
  the task left in the workdir.

Results travel on the supervisor's stdout, which no task can write (tasks'
stdout and stderr are pipes the supervisor reads): one frame per task,
``"\\x1e<nonce> <id> <exit> <timed_out> <out_truncated> <err_truncated>
<out_size> <err_size>\\n"`` then the bytes. The nonce arrives as the first line
on stdin and lives only in the supervisor's memory.
"""

from __future__ import annotations

from ._languages import RUNNERS

BATCH_FRAME_START = b"\x1e"


def _runner_table() -> dict[str, tuple[str, tuple[str, ...], dict[str, str]]]:
    return {
        language: (runner.filename, runner.interpreter, dict(runner.environment))
        for language, runner in RUNNERS.items()
    }


# Run as `python3 -I -S -c BATCH_SUPERVISOR <workdir> <first_uid> <uid_count> <nproc> <as_bytes>
# <slots>`.
BATCH_SUPERVISOR = f"""
import ctypes, os, resource, secrets, selectors, shutil, signal, socket, sys, time
RUNNERS = {_runner_table()!r}
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
workdir = sys.argv[1]
first_uid, uid_count, nproc, address_space, slots = (int(value) for value in sys.argv[2:7])
os.chmod(workdir, 0o1733)
for shared in ("/tmp", "/dev/shm"):
    try:
        os.chmod(shared, 0o755)
    except OSError:
        pass
signal.signal(signal.SIGPIPE, signal.SIG_IGN)

def become_the_task(uid, language, program_socket, out_write, err_write):
    # In a fresh fork of the zygote, which never held any task's program or output.
    os.dup2(out_write, 1)
    os.dup2(err_write, 2)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    chunks = []
    while True:
        chunk = os.read(program_socket, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    program = b"".join(chunks)
    os.closerange(3, 65536)
    for number in (signal.SIGPIPE, signal.SIGCHLD, signal.SIGXFSZ):
        signal.signal(number, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    with open("/proc/self/oom_score_adj", "w") as handle:
        handle.write("1000")
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    capability = 0
    while libc.prctl(24, capability, 0, 0, 0) == 0:  # PR_CAPBSET_DROP, until EINVAL
        capability += 1
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    if libc.capset(header, (ctypes.c_uint32 * 6)()) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    directory = os.path.join(workdir, secrets.token_hex(16))
    os.mkdir(directory, 0o700)
    os.chdir(directory)
    filename, interpreter, variables = RUNNERS[language]
    path = os.path.join(directory, filename)
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    view = memoryview(program)
    while view:
        view = view[os.write(handle, view):]
    os.close(handle)
    os.environ.update(variables)
    os.environ.update(HOME=directory, TMPDIR=directory)
    if language != "python":
        os.execvpe(interpreter[0], [*interpreter, path], dict(os.environ))
    # Python runs in this already started interpreter, as `python3 main.py` would
    # (site-packages, sys.path, __main__), without paying for a new interpreter.
    sys.dont_write_bytecode = True
    sys.argv = [path]
    sys.path.insert(0, directory)
    for number, name in ((1, "stdout"), (2, "stderr")):
        stream = io.TextIOWrapper(
            io.FileIO(number, "w", closefd=False), encoding="utf-8",
            errors="backslashreplace", write_through=True,
        )
        setattr(sys, name, stream)
        setattr(sys, "__" + name + "__", stream)
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    code = 0
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as ending:
        if ending.code is None:
            code = 0
        elif isinstance(ending.code, int):
            code = ending.code & 0xFF
        else:
            print(ending.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(code)

def zygote(channel):
    # Forks the tasks. Forked before the supervisor read anything, it holds no
    # task's program or output; it reports each task's pid and exit status.
    global io, runpy, traceback
    # What every Python task needs, imported once here rather than in each task
    # (runpy imports pkgutil on its first use: about 8 ms a task otherwise).
    import io, pkgutil, runpy, traceback
    # The site directories every Python task gets, set up once (about 9 ms a task otherwise).
    import site
    site.main()
    woken_read, woken_write = os.pipe()
    os.set_blocking(woken_write, False)
    signal.signal(signal.SIGCHLD, lambda number, frame: None)
    signal.set_wakeup_fd(woken_write)
    waiting = selectors.DefaultSelector()
    waiting.register(channel, selectors.EVENT_READ)
    waiting.register(woken_read, selectors.EVENT_READ)
    while True:
        for key, events in waiting.select():
            if key.fd == woken_read:
                try:
                    os.read(woken_read, 4096)
                except BlockingIOError:
                    pass
                continue
            message, descriptors, flags, address = socket.recv_fds(channel, 256, 3)
            if not message:
                os._exit(0)
            uid, language = message.decode().split(" ")
            child = os.fork()
            if child == 0:
                try:
                    become_the_task(int(uid), language, *descriptors)
                except BaseException as error:
                    try:
                        why = "sandcrew: cannot start the program: " + str(error) + "\\n"
                        os.write(2, why.encode())
                    except OSError:
                        pass
                os._exit(125)
            for descriptor in descriptors:
                os.close(descriptor)
            channel.send(("pid " + str(child)).encode())
        while True:
            try:
                ended, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if ended == 0:
                break
            code = os.waitstatus_to_exitcode(status)
            code = 128 - code if code < 0 else code
            channel.send(("exit " + str(ended) + " " + str(code)).encode())

channel, zygote_channel = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
zygote_pid = os.fork()
if zygote_pid == 0:
    channel.close()
    try:
        zygote(zygote_channel)
    finally:
        os._exit(0)
zygote_channel.close()

def say(data):
    while data:
        data = data[os.write(1, data):]

def running(uid):
    itself = str(os.getpid())
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == itself:
            continue
        try:
            if os.stat("/proc/" + name).st_uid != uid:
                continue
            with open("/proc/" + name + "/stat") as handle:
                state = handle.read().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if state not in "ZX":
            return True
    return False

def entries():
    try:
        found = os.scandir(workdir)
        return {{entry.name: entry.stat(follow_symlinks=False).st_uid for entry in found}}
    except OSError:
        return {{}}

def reap(uid):
    # As the task's uid, kill(-1) reaches exactly the task's processes (never
    # the caller); they may kill the reaper too, so repeat until none runs.
    for attempt in range(50):
        reap_once(uid)
        if not running(uid):
            break

def reap_once(uid):
    left = [name for name, owner in entries().items() if owner == uid]
    reaper = os.fork()
    if reaper == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            give_up = time.monotonic() + 5.0
            while time.monotonic() < give_up:
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    break
                if not running(uid):
                    break  # zombies only: killed, waiting for their parent or init
                time.sleep(0.001)
            def writable(function, path, error):
                try:
                    os.chmod(os.path.dirname(path), 0o700)
                    os.chmod(path, 0o700)
                    function(path)
                except OSError:
                    pass
            for name in left:
                path = os.path.join(workdir, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, onerror=writable)
                else:
                    try:
                        os.unlink(path)
                    except OSError:
                        pass
        finally:
            os._exit(0)
    os.waitpid(reaper, 0)

class Task:
    pass

selector = selectors.DefaultSelector()
selector.register(0, selectors.EVENT_READ, "host")
selector.register(channel, selectors.EVENT_READ, "zygote")
nonce = None
incoming = b""
tasks = {{}}
starting = []
queued = []
next_uid = 0
host_open = True

def keep(task, descriptor, chunk):
    buffer = task.buffers[descriptor]
    room = task.output_limit - len(buffer)
    if room > 0:
        buffer += chunk[:room]
    if len(chunk) > room:
        task.cut[descriptor] = True

def frame(identifier, code, timed_out, out, err, out_cut, err_cut):
    head = "{{}} {{}} {{}} {{}} {{}} {{}} {{}}\\n".format(
        identifier, code, int(timed_out), int(out_cut), int(err_cut), len(out), len(err)
    )
    say({BATCH_FRAME_START!r} + nonce + b" " + head.encode() + out + err)

def finish(task, code):
    task.done = True
    reap(task.uid)
    for descriptor in (task.out, task.err):
        while True:
            try:
                chunk = os.read(descriptor, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            keep(task, descriptor, chunk)
        try:
            selector.unregister(descriptor)
        except (KeyError, ValueError):
            pass
        os.close(descriptor)
    frame(
        task.id, 137 if task.timed_out else code, task.timed_out,
        bytes(task.buffers[task.out]), bytes(task.buffers[task.err]),
        task.cut[task.out], task.cut[task.err],
    )

def take_requests():
    global incoming, nonce
    while True:
        if nonce is None:
            if b"\\n" not in incoming:
                return
            line, _, incoming = incoming.partition(b"\\n")
            nonce = line.strip()
            continue
        if b"\\n" not in incoming:
            return
        line, _, rest = incoming.partition(b"\\n")
        identifier, language, size, limit_ms, output_limit = line.decode().split(" ")
        size = int(size)
        if len(rest) < size:
            return
        program, incoming = rest[:size], rest[size:]
        if language not in RUNNERS or next_uid >= uid_count:
            refusal = b"sandcrew: cannot run this program here\\n"
            frame(identifier, 125, False, b"", refusal, False, False)
            continue
        queued.append((identifier, language, program, limit_ms, output_limit))

def launch_queued():
    # At most `slots` programs run at once; the host keeps a few more queued
    # here so that no slot waits for a round trip to the host.
    while queued and len(tasks) + len(starting) < slots:
        launch(*queued.pop(0))

def launch(identifier, language, program, limit_ms, output_limit):
    global next_uid
    task = Task()
    task.id = identifier
    task.output_limit = int(output_limit)
    task.uid = first_uid + next_uid
    next_uid += 1
    task.timed_out = False
    task.done = False
    task.limit = int(limit_ms) / 1000
    task.ends_at = float("inf")
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    request = (str(task.uid) + " " + language).encode()
    socket.send_fds(channel, [request], [theirs.fileno(), out_write, err_write])
    theirs.close()
    os.close(out_write)
    os.close(err_write)
    ours.sendall(program)
    ours.close()
    task.out, task.err = out_read, err_read
    task.buffers = {{out_read: bytearray(), err_read: bytearray()}}
    task.cut = {{out_read: False, err_read: False}}
    for descriptor in (out_read, err_read):
        os.set_blocking(descriptor, False)
        selector.register(descriptor, selectors.EVENT_READ, task)
    starting.append(task)

def from_zygote():
    message = channel.recv(256)
    if not message:
        os._exit(125)
    words = message.decode().split(" ")
    if words[0] == "pid":
        task = starting.pop(0)
        task.pid = int(words[1])
        task.ends_at = time.monotonic() + task.limit
        tasks[task.pid] = task
    else:
        task = tasks.pop(int(words[1]), None)
        if task is not None:
            finish(task, int(words[2]))
            launch_queued()

while host_open or tasks or starting or queued:
    now = time.monotonic()
    wait = min([task.ends_at - now for task in tasks.values()] + [1.0])
    for key, events in selector.select(max(0.0, wait)):
        if key.data == "host":
            chunk = os.read(0, 1 << 20)
            if not chunk:
                host_open = False
                selector.unregister(0)
                for task in tasks.values():
                    reap(task.uid)
                continue
            incoming += chunk
            take_requests()
            launch_queued()
        elif key.data == "zygote":
            from_zygote()
        else:
            task = key.data
            if task.done:
                continue  # finished earlier in this round; its descriptor may be reused
            try:
                chunk = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            if chunk:
                keep(task, key.fd, chunk)
            else:
                selector.unregister(key.fd)
    now = time.monotonic()
    for task in list(tasks.values()):
        if now >= task.ends_at:
            task.timed_out = True
            task.ends_at = float("inf")
            reap(task.uid)  # the zygote then reports its end
"""


def batch_supervisor_command(
    workdir: str,
    first_uid: int,
    uid_count: int,
    *,
    processes: int,
    address_space: int,
    slots: int,
) -> list[str]:
    """The container command of a batch: workdir, the tasks' uid range, per-task limits."""
    return [
        "python3",
        "-I",
        "-S",
        "-c",
        BATCH_SUPERVISOR,
        workdir,
        str(first_uid),
        str(uid_count),
        str(processes),
        str(address_space),
        str(slots),
    ]
