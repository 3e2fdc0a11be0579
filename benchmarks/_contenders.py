"""The ways of running ``print(1)`` that the benchmarks compare.

Every peer is imported lazily inside its opener, so a missing package only
turns its own row into "not installed". All peers run the same local image,
``sandcrew/python:latest`` (nothing is pulled). llm-sandbox and autogen-ext
invoke the interpreter as ``python``, which that image names ``python3``, and
llm-sandbox's pool runs ``/sandbox/.sandbox-venv/bin/python`` (a venv that its
environment setup would make and fill from PyPI). For them the benchmarks build
a temporary image that adds only these two links to the interpreter, and remove
it when they finish.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from _bench import AsyncRun, BlockingRun, Contender, Opener, Run, Unavailable

if TYPE_CHECKING:
    import docker

IMAGE = "sandcrew/python:latest"
ALIAS_IMAGE = "sandcrew-benchmarks/python-alias:latest"
"""``IMAGE`` plus two links to ``python3``; built on demand, removed by :func:`cleanup`."""
LABEL = "sandcrew-benchmarks"
"""Label on the containers these benchmarks create themselves, for the final sweep."""
PROGRAM = "print(1)"
SANDCREW_COLD = "sandcrew cold"
SANDCREW_POOLED_SPACED = "sandcrew pooled, runs 0.5 s apart"
POOL_SIZE = 4

# llm-sandbox runs its venv's python and, for its interactive session, "pip install
# ipython" first: the image has IPython (and no pip), so that pip only checks it is there.
_ALIAS_DOCKERFILE = f"""FROM {IMAGE}
USER root
RUN ln -s /usr/bin/python3 /usr/local/bin/python \\
 && mkdir -p /sandbox/.sandbox-venv/bin \\
 && ln -s /usr/bin/python3 /sandbox/.sandbox-venv/bin/python \\
 && printf '#!/bin/sh\\nexec python3 -c "import IPython"\\n' > /sandbox/.sandbox-venv/bin/pip \\
 && chmod 755 /sandbox/.sandbox-venv/bin/pip
USER 10001:10001
LABEL {LABEL}=1
"""

MIB = 1024 * 1024


def hardened_options() -> dict[str, Any]:
    """``containers.create`` settings equal to sandcrew's defaults (no network option)."""
    from docker.types import Ulimit

    tmpfs = "rw,nosuid,nodev,noexec"
    return {
        "user": "10001:10001",
        "working_dir": "/workspace",
        "hostname": "sandbox",
        "environment": {"HOME": "/workspace"},
        "read_only": True,
        "tmpfs": {
            "/workspace": f"{tmpfs},size={64 * MIB},uid=10001,gid=10001,mode=0700",
            "/tmp": f"{tmpfs},size={64 * MIB},mode=1777",
        },
        "shm_size": 16 * MIB,
        "security_opt": ["no-new-privileges:true"],
        "cap_drop": ["ALL"],
        "pids_limit": 64,
        "mem_limit": 256 * MIB,
        "memswap_limit": 256 * MIB,
        "nano_cpus": 1_000_000_000,
        "ulimits": [
            Ulimit(name="fsize", soft=16 * MIB, hard=16 * MIB),
            Ulimit(name="nofile", soft=256, hard=256),
            Ulimit(name="core", soft=0, hard=0),
        ],
        "init": True,
        "labels": {LABEL: "1"},
    }


def _docker_client() -> docker.DockerClient:
    import docker
    import docker.errors

    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        raise Unavailable(f"Docker is not reachable ({exc})") from None
    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        client.close()
        raise Unavailable(f"image {IMAGE} is missing; run `sandcrew images build`") from None
    return client


def machine_facts() -> str:
    """Cores, engine version, default runtime, cgroup version and storage driver."""
    try:
        client = _docker_client()
    except Unavailable as exc:
        return str(exc)
    try:
        info = client.info()
        version = client.version().get("Version", "?")
    finally:
        client.close()
    return (
        f"{os.cpu_count()} cores, Docker {version}, {info.get('DefaultRuntime', '?')}, "
        f"cgroup v{info.get('CgroupVersion', '?')}, {info.get('Driver', '?')}"
    )


def ensure_alias_image(client: docker.DockerClient) -> str:
    """Build :data:`ALIAS_IMAGE` from :data:`IMAGE` (local layers only) once."""
    import docker.errors

    try:
        client.images.get(ALIAS_IMAGE)
    except docker.errors.ImageNotFound:
        dockerfile = io.BytesIO(_ALIAS_DOCKERFILE.encode())
        client.images.build(fileobj=dockerfile, tag=ALIAS_IMAGE, forcerm=True, pull=False)
    return ALIAS_IMAGE


def cleanup() -> list[str]:
    """Remove leftover benchmark containers and the alias image; what could not be removed."""
    import docker
    import docker.errors

    problems: list[str] = []
    try:
        client = docker.from_env()
    except docker.errors.DockerException:
        return problems
    try:
        for container in client.containers.list(all=True, filters={"label": LABEL}):
            container.remove(force=True)
        try:
            client.images.remove(ALIAS_IMAGE)
        except docker.errors.ImageNotFound:
            pass
        except docker.errors.APIError as exc:
            problems.append(f"{ALIAS_IMAGE}: {exc.explanation}")
    finally:
        client.close()
    return problems


def _decoded(output: bytes | None) -> str:
    return (output or b"").decode("utf-8", "replace")


# --- floors ---------------------------------------------------------------------------


@asynccontextmanager
async def bare_python() -> AsyncIterator[Run]:
    # The system interpreter, not a pyenv shim or this venv (both start slower).
    python = shutil.which("python3", path=os.defpath) or sys.executable

    def call() -> str:
        done = subprocess.run([python, "-c", PROGRAM], capture_output=True, text=True, check=True)
        return done.stdout

    yield BlockingRun(call)


SUPERVISED_BY_PYTHON = (
    "import os\n"
    "child = os.fork()\n"
    "if child == 0:\n"
    f"    os.execvp('python3', ['python3', '-c', {PROGRAM!r}])\n"
    "os.waitpid(child, 0)\n"
)
"""The least a run with a Python supervisor does: its interpreter starts, forks, and the
child execs the program's own interpreter; nothing else (no header, no privileges, no
trailer)."""


def attached_throwaway(command: list[str]) -> Opener:
    """A hardened throwaway run the way sandcrew's cold run talks to the engine: ``create``,
    ``attach``, ``start``, the output read from the attach connection as soon as it comes,
    the removal after it in the background (waited for when the opener closes)."""

    @asynccontextmanager
    async def opener() -> AsyncIterator[Run]:
        import threading

        client = _docker_client()
        removals: list[threading.Thread] = []

        def remove_later(container_id: str) -> None:
            removal = threading.Thread(
                target=lambda: client.api.remove_container(container_id, force=True, v=True)
            )
            removal.start()
            removals.append(removal)

        def call() -> str:
            container = client.containers.create(
                IMAGE, command, network_disabled=True, stdin_open=True, **hardened_options()
            )
            container_id = str(container.id)
            try:
                connection = client.api.attach_socket(
                    container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
                )
                try:
                    container.start()
                    return _stdout_line(connection)
                finally:
                    connection.close()
            finally:
                remove_later(container_id)

        try:
            yield BlockingRun(call)
        finally:
            for removal in removals:
                removal.join()
            client.close()

    return opener


def _stdout_line(connection: Any) -> str:
    """The first line of stdout from an attach connection (the SDK's frame reader)."""
    from docker.utils.socket import STDOUT, frames_iter

    stdout = b""
    for stream, data in frames_iter(connection, tty=False):  # type: ignore[no-untyped-call]
        if stream == STDOUT:
            stdout += data
            if b"\n" in stdout:
                return _decoded(stdout.split(b"\n", 1)[0] + b"\n")
    raise RuntimeError(f"the container ended before a line: {stdout!r}")


@asynccontextmanager
async def exec_into_running() -> AsyncIterator[Run]:
    client = _docker_client()
    container = client.containers.run(
        IMAGE, ["sleep", "infinity"], detach=True, network_disabled=True, **hardened_options()
    )
    try:

        def call() -> str:
            exit_code, output = container.exec_run(["python3", "-c", PROGRAM])
            text = _decoded(output if isinstance(output, bytes) else b"".join(output))
            if exit_code != 0:
                raise RuntimeError(f"exit code {exit_code}: {text}")
            return text

        yield BlockingRun(call)
    finally:
        container.remove(force=True)
        client.close()


def _sdk_throwaway(network: dict[str, Any]) -> Opener:
    @asynccontextmanager
    async def opener() -> AsyncIterator[Run]:
        from docker.types import LogConfig

        client = _docker_client()
        options = hardened_options()
        # json-file (capped) so that `logs` has something to read.
        options["log_config"] = LogConfig(
            type="json-file", config={"max-size": "1m", "max-file": "1"}
        )

        def call() -> str:
            container = client.containers.create(
                IMAGE, ["python3", "-c", PROGRAM], **network, **options
            )
            try:
                container.start()
                status = container.wait()
                output = _decoded(container.logs(stdout=True, stderr=False))
                if status.get("StatusCode") != 0:
                    raise RuntimeError(f"exit status {status}: {output}")
                return output
            finally:
                container.remove(force=True)

        try:
            yield BlockingRun(call)
        finally:
            client.close()

    return opener


@asynccontextmanager
async def docker_cli() -> AsyncIterator[Run]:
    docker = shutil.which("docker")
    if docker is None:
        raise Unavailable("the docker command is not on PATH")
    command = [docker, "run", "--rm", "--network", "none", "--label", f"{LABEL}=1"]
    command += [IMAGE, "python3", "-c", PROGRAM]

    def call() -> str:
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout

    yield BlockingRun(call)


# --- peers ----------------------------------------------------------------------------


@asynccontextmanager
async def epicbox_run() -> AsyncIterator[Run]:
    import epicbox
    import structlog

    _docker_client().close()
    # epicbox logs every step through structlog to stdout; keep the table readable.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    epicbox.configure(profiles=[epicbox.Profile("python", IMAGE)])
    files = [{"name": "main.py", "content": PROGRAM.encode()}]
    limits = {"cputime": 10, "realtime": 10, "memory": 256, "processes": 64}

    def call() -> str:
        result = epicbox.run("python", "python3 main.py", files=files, limits=limits)
        if result["exit_code"] != 0:
            raise RuntimeError(f"exit code {result['exit_code']}: {_decoded(result['stderr'])}")
        return _decoded(result["stdout"])

    yield BlockingRun(call)


def _llm_sandbox_fresh(runtime_configs: dict[str, Any]) -> Opener:
    @asynccontextmanager
    async def opener() -> AsyncIterator[Run]:
        from llm_sandbox import SandboxSession

        client = _docker_client()
        image = ensure_alias_image(client)

        def call() -> str:
            # skip_environment_setup: its default setup makes a venv and upgrades
            # pip from PyPI in every new container, which needs a registry.
            with SandboxSession(
                lang="python",
                image=image,
                client=client,
                skip_environment_setup=True,
                runtime_configs={**runtime_configs, "labels": {LABEL: "1"}},
            ) as session:
                result = session.run(PROGRAM)
            if result.exit_code != 0:
                raise RuntimeError(
                    f"exit code {result.exit_code}: {result.stderr or result.stdout}"
                )
            return str(result.stdout)

        try:
            yield BlockingRun(call)
        finally:
            client.close()

    return opener


@asynccontextmanager
async def llm_sandbox_pooled() -> AsyncIterator[Run]:
    from llm_sandbox.const import SandboxBackend
    from llm_sandbox.pool import PoolConfig, PooledSandboxSession, create_pool_manager

    client = _docker_client()
    image = ensure_alias_image(client)
    pool = create_pool_manager(
        client=client,
        backend=SandboxBackend.DOCKER,
        config=PoolConfig(max_pool_size=POOL_SIZE, min_pool_size=POOL_SIZE),
        lang="python",
        image=image,
        skip_environment_setup=True,
        # init forwards `docker stop`'s SIGTERM, so closing the pool takes no 10 s per container.
        runtime_configs={"init": True, "labels": {LABEL: "1"}},
    )

    def call() -> str:
        with PooledSandboxSession(pool_manager=pool) as session:
            result = session.run(PROGRAM)
        if result.exit_code != 0:
            raise RuntimeError(f"exit code {result.exit_code}: {result.stderr or result.stdout}")
        return str(result.stdout)

    try:
        yield BlockingRun(call)
    finally:
        pool.close()
        client.close()


def _autogen_executor(image: str, work_dir: str) -> Any:
    from autogen_ext.code_executors.docker import DockerCommandLineCodeExecutor

    return DockerCommandLineCodeExecutor(image=image, work_dir=work_dir, timeout=60)


async def _autogen_execute(executor: Any) -> str:
    from autogen_core import CancellationToken
    from autogen_core.code_executor import CodeBlock

    result = await executor.execute_code_blocks(
        [CodeBlock(code=PROGRAM, language="python")], CancellationToken()
    )
    if result.exit_code != 0:
        raise RuntimeError(f"exit code {result.exit_code}: {result.output}")
    return str(result.output)


def _readable_work_dir() -> tempfile.TemporaryDirectory[str]:
    # autogen-ext bind-mounts this host folder; the image's user (uid 10001)
    # must be able to read the code files that the executor writes there.
    work_dir = tempfile.TemporaryDirectory(prefix="sandcrew-bench-autogen-")
    os.chmod(work_dir.name, 0o755)
    return work_dir


@asynccontextmanager
async def autogen_warm() -> AsyncIterator[Run]:
    import autogen_ext.code_executors.docker  # noqa: F401  (fail early when missing)

    client = _docker_client()
    image = ensure_alias_image(client)
    client.close()
    with _readable_work_dir() as work_dir:
        executor = _autogen_executor(image, work_dir)
        await executor.start()
        try:
            yield AsyncRun(lambda: _autogen_execute(executor))
        finally:
            await executor.stop()


@asynccontextmanager
async def autogen_start_run_stop() -> AsyncIterator[Run]:
    import autogen_ext.code_executors.docker  # noqa: F401  (fail early when missing)

    client = _docker_client()
    image = ensure_alias_image(client)
    client.close()

    async def call() -> str:
        with _readable_work_dir() as work_dir:
            executor = _autogen_executor(image, work_dir)
            await executor.start()
            try:
                return await _autogen_execute(executor)
            finally:
                await executor.stop()

    yield AsyncRun(call)


# --- sandcrew -------------------------------------------------------------------------


def _sandcrew(pooled: bool, pause_before: float = 0.0) -> Opener:
    @asynccontextmanager
    async def opener() -> AsyncIterator[Run]:
        from sandcrew.sandbox import DockerSandbox, SandboxConfig

        _docker_client().close()
        config = SandboxConfig()
        if pooled:
            if "pool_size" not in SandboxConfig.model_fields:
                raise Unavailable("this sandcrew version has no container pool (pool_size)")
            config = SandboxConfig(pool_size=POOL_SIZE)

        async with DockerSandbox(config) as sandbox:

            async def call() -> str:
                result = await sandbox.run(PROGRAM, "python")
                if result.exit_code != 0:
                    raise RuntimeError(
                        f"exit code {result.exit_code} (timed out: {result.timed_out}, "
                        f"OOM-killed: {result.oom_killed}, took {result.duration:.2f} s): "
                        f"{result.stderr or result.stdout}"
                    )
                return str(result.stdout)

            yield AsyncRun(call, pause_before=pause_before)

    return opener


ALL: tuple[Contender, ...] = (
    Contender("bare python3 -c", "host process, no container: the program's floor", bare_python),
    Contender(
        "exec into running container",
        "docker SDK exec_run into one long-lived hardened container (not throwaway)",
        exec_into_running,
        package="docker",
    ),
    Contender(
        "SDK hardened, network_disabled",
        "create/start/wait/logs/remove, same hardening as sandcrew",
        _sdk_throwaway({"network_disabled": True}),
        package="docker",
    ),
    Contender(
        "SDK hardened, network_mode=none",
        "as above with network_mode='none'",
        _sdk_throwaway({"network_mode": "none"}),
        package="docker",
    ),
    Contender(
        "docker run --rm --network none",
        "CLI in a subprocess, no other hardening",
        docker_cli,
    ),
    Contender(
        "epicbox run()",
        "throwaway; runs as root, default capabilities, writable root filesystem",
        epicbox_run,
        package="epicbox",
    ),
    Contender(
        "llm-sandbox fresh, tuned",
        "new root container per session; init=True so `docker stop` returns at once",
        _llm_sandbox_fresh({"init": True}),
        package="llm-sandbox",
    ),
    Contender(
        "llm-sandbox fresh, default",
        "new root container per session; `docker stop` waits 10 s for its shell",
        _llm_sandbox_fresh({}),
        package="llm-sandbox",
        slow=True,
    ),
    Contender(
        "llm-sandbox pooled",
        f"pool of {POOL_SIZE}; containers REUSED between runs, no reset",
        llm_sandbox_pooled,
        package="llm-sandbox",
    ),
    Contender(
        "autogen-ext warm exec",
        "one long-lived container, every run execs into it (not throwaway)",
        autogen_warm,
        package="autogen-ext[docker]",
    ),
    Contender(
        "autogen-ext start+run+stop",
        "a new executor per run; stop() waits 10 s in `docker stop`",
        autogen_start_run_stop,
        package="autogen-ext[docker]",
        slow=True,
    ),
    Contender(
        SANDCREW_COLD,
        "DockerSandbox.run: a new hardened container per run",
        _sandcrew(pooled=False),
        package="sandcrew",
    ),
    Contender(
        "sandcrew pooled",
        f"pool of {POOL_SIZE} pre-started containers, each serves one run",
        _sandcrew(pooled=True),
    ),
    Contender(
        SANDCREW_POOLED_SPACED,
        "as above, with an untimed 0.5 s pause before each run, as between a chat's model "
        "turns (latency only)",
        _sandcrew(pooled=True, pause_before=0.5),
        package="sandcrew",
        latency_only=True,
    ),
)
