"""One program in one new container: create, attach, start, deliver, collect, remove.

The container's command is a tiny shell bootstrap: it reads a size line and then
exactly that many bytes of program from stdin into the work dir (a tmpfs), and
execs the interpreter on the file with stdin on /dev/null, so ``input()`` sees
EOF at once. Nothing is bind-mounted from the host and no archive is copied:
the program travels on the attach connection that also brings the output back.

A host-side timer kills the container at the deadline whatever it prints, and
the container is force-removed afterwards whatever happens — success, error,
timeout, cancellation or Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import docker
import docker.errors
from docker.types import LogConfig, Ulimit

from ._config import SandboxConfig
from ._errors import ImageNotFoundError, SandboxError
from ._labels import container_labels
from ._languages import RUNNERS
from ._result import TIMEOUT_EXIT_CODE, ExecutionResult
from ._streams import CappedBuffer, close_connection, deliver_and_collect

_T = TypeVar("_T")

# Reads the program's size, then the program, then replaces itself with the
# interpreter. `read` consumes the size line byte by byte, so `head` gets
# exactly the program; `exec` keeps the interpreter the init's only child.
BOOTSTRAP = 'IFS= read -r size && head -c "$size" > "$1" && shift && exec "$@" < /dev/null'

_ATTACH_PARAMS = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
# Variables the program sees besides those the image sets. Nothing of the
# host's environment is ever passed on.
_PYTHON_ENVIRONMENT = {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def host_config(api: docker.APIClient, config: SandboxConfig) -> dict[str, Any]:
    """The hardened HostConfig of a sandbox container."""
    # noexec as Docker's own default for tmpfs: programs cannot drop and run binaries.
    tmpfs_options = "rw,nosuid,nodev,noexec"
    options: dict[str, Any] = {
        "read_only": config.read_only_root,
        "tmpfs": {
            config.workdir: (
                f"{tmpfs_options},size={config.workdir_tmpfs_bytes},"
                f"uid={config.uid},gid={config.gid},mode=0700"
            ),
            "/tmp": f"{tmpfs_options},size={config.tmp_tmpfs_bytes},mode=1777",
        },
        "shm_size": config.shm_bytes,
        "security_opt": ["no-new-privileges:true"] if config.no_new_privileges else None,
        "cap_drop": ["ALL"] if config.drop_all_capabilities else None,
        "pids_limit": config.pids_limit,
        "mem_limit": config.memory_bytes,
        # Equal to the memory limit: no swap on top of it.
        "memswap_limit": config.memory_bytes,
        "nano_cpus": round(config.cpus * 1e9),
        "ulimits": [
            Ulimit(
                name="fsize", soft=config.file_size_limit_bytes, hard=config.file_size_limit_bytes
            ),
            Ulimit(name="nofile", soft=config.open_files_limit, hard=config.open_files_limit),
            Ulimit(
                name="core", soft=config.core_dump_limit_bytes, hard=config.core_dump_limit_bytes
            ),
        ],
        "init": config.init,
        "log_config": _log_config(config),
        "runtime": config.runtime,
    }
    return api.create_host_config(**options)


def _log_config(config: SandboxConfig) -> LogConfig:
    if config.log_driver == "none":
        return LogConfig(type="none")
    return LogConfig(
        type="json-file", config={"max-size": str(config.log_max_bytes), "max-file": "1"}
    )


def create_options(
    api: docker.APIClient,
    config: SandboxConfig,
    *,
    language: str,
    image: str,
    run_id: str,
    timeout: float,
) -> dict[str, Any]:
    """Arguments of ``APIClient.create_container`` for one run."""
    runner = RUNNERS[language]
    program_path = f"{config.workdir}/{runner.filename}"
    created_at = time.time()
    environment = {"HOME": config.workdir}
    if language == "python":
        environment.update(_PYTHON_ENVIRONMENT)
    return {
        "image": image,
        "command": [
            "/bin/sh",
            "-c",
            BOOTSTRAP,
            "sandcrew",
            program_path,
            *runner.interpreter,
            program_path,
        ],
        "name": f"sandcrew-{run_id}",
        "hostname": "sandbox",
        "user": config.user,
        "working_dir": config.workdir,
        "environment": environment,
        "labels": container_labels(
            run_id=run_id,
            created_at=created_at,
            deadline=created_at + timeout + config.reap_grace_seconds,
        ),
        # With detach=False (the default) the SDK also sets StdinOnce: the
        # container's stdin closes when our attach connection does.
        "stdin_open": True,
        # Never copy proxy settings from the docker CLI config into the container.
        "use_config_proxy": False,
        # An empty network namespace with only `lo`, and no time spent on
        # network setup (faster than network_mode="none" on Docker 20.10).
        "network_disabled": not config.network,
        "host_config": host_config(api, config),
    }


async def run_in_new_container(
    client: docker.DockerClient,
    config: SandboxConfig,
    *,
    code: str,
    language: str,
    image: str,
    run_id: str,
    time_limit: float,
) -> ExecutionResult:
    """Run ``code`` in a new container and remove the container whatever happens."""
    api = client.api
    options = create_options(
        api, config, language=language, image=image, run_id=run_id, timeout=time_limit
    )
    created = threading.Event()

    def create() -> str:
        try:
            return str(api.create_container(**options)["Id"])
        finally:
            created.set()

    try:
        # Shielded: if this task is cancelled while the engine is creating the
        # container, the creation still completes and the cleanup below sees it.
        container_id = await asyncio.shield(_in_thread(_translated(create, image=image)))
        return await _attach_and_run(
            api, config, container_id, code, language, image, run_id, time_limit
        )
    finally:
        await asyncio.shield(_in_thread(_remove_after_creation, api, options["name"], created))


async def _attach_and_run(
    api: docker.APIClient,
    config: SandboxConfig,
    container_id: str,
    code: str,
    language: str,
    image: str,
    run_id: str,
    time_limit: float,
) -> ExecutionResult:
    loop = asyncio.get_running_loop()
    program = code.encode()
    payload = f"{len(program)}\n".encode() + program
    started: asyncio.Future[float] = loop.create_future()

    def mark_started() -> None:
        _call_soon(loop, _settle, started, loop.time())

    # One thread owns the attach connection from opening to closing, so no
    # cancellation can leak it: once the container is removed it ends anyway.
    outcome = _in_thread(
        _attach_start_collect,
        api,
        container_id,
        payload,
        config.max_output_bytes,
        mark_started,
        image,
    )
    kill: asyncio.Future[bool] | None = None

    def at_deadline() -> None:
        nonlocal kill
        kill = _in_thread(_kill, api, container_id)

    timer: asyncio.TimerHandle | None = None
    try:
        first: set[asyncio.Future[Any]] = {started, outcome}
        await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
        if started.done():
            # The deadline counts from the start, whatever the program prints.
            timer = loop.call_at(started.result() + time_limit, at_deadline)
        stdout, stderr, status = await outcome
        duration = loop.time() - started.result()
    finally:
        outcome.cancel()  # a no-op once done; otherwise nobody awaits it any more
        if timer is not None:
            timer.cancel()
    timed_out = await kill if kill is not None else False
    exit_code = status
    oom_killed = False
    if timed_out:
        exit_code = TIMEOUT_EXIT_CODE
    elif status != 0:
        # Only a failed run can have been killed for memory; successes skip the call.
        state = await asyncio.to_thread(
            _translated(lambda: api.inspect_container(container_id)["State"], image=image)
        )
        oom_killed = bool(state.get("OOMKilled", False))
    return ExecutionResult(
        language=language,
        exit_code=exit_code,
        stdout=stdout.text(),
        stderr=stderr.text(),
        timed_out=timed_out,
        oom_killed=oom_killed,
        stdout_truncated=stdout.truncated,
        stderr_truncated=stderr.truncated,
        duration=duration,
        image=image,
        run_id=run_id,
        timeout=time_limit,
        memory_limit_bytes=config.memory_bytes,
    )


def _settle(future: asyncio.Future[float], value: float) -> None:
    if not future.done():
        future.set_result(value)


def _attach_start_collect(
    api: docker.APIClient,
    container_id: str,
    payload: bytes,
    limit: int,
    on_started: Callable[[], None],
    image: str,
) -> tuple[CappedBuffer, CappedBuffer, int]:
    """Attach (before the start, so no output is missed), start, deliver, collect, wait."""
    attached = _translated(
        lambda: api.attach_socket(container_id, params=_ATTACH_PARAMS), image=image
    )()
    try:
        _translated(lambda: api.start(container_id), image=image)()
    except BaseException:
        close_connection(attached)
        raise
    on_started()
    stdout, stderr = deliver_and_collect(attached, payload, limit=limit)
    # The streams end when the program's last process is gone; a program that
    # closed its stdout but lives on is waited for until the deadline kills it.
    try:
        status = api.wait(container_id, timeout=None)
    except docker.errors.NotFound:
        raise _vanished() from None
    except docker.errors.APIError as exc:
        raise SandboxError(
            f"Docker failed while waiting for the program: {_explain(exc)}"
        ) from None
    return stdout, stderr, int(status.get("StatusCode", -1))


def _kill(api: docker.APIClient, container_id: str) -> bool:
    """SIGKILL the container; ``False`` when it had already ended on its own."""
    try:
        api.kill(container_id, signal="SIGKILL")
    except docker.errors.APIError:
        return False
    return True


def _remove_after_creation(api: docker.APIClient, name: str, created: threading.Event) -> None:
    # Wait for an in-flight creation so that a container created just after a
    # cancellation is removed as well.
    created.wait()
    try:
        api.remove_container(name, force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: another removal is already under way.
            raise SandboxError(
                f"Docker could not remove the sandbox container {name}: {_explain(exc)}; "
                "`sandcrew sandbox gc` will retry"
            ) from None


def _translated(call: Callable[[], _T], *, image: str) -> Callable[[], _T]:
    """Wrap a Docker call so that engine errors become sandbox errors with a fix."""

    def wrapper() -> _T:
        try:
            return call()
        except docker.errors.ImageNotFound:
            raise ImageNotFoundError(image) from None
        except docker.errors.NotFound:
            raise _vanished() from None
        except docker.errors.APIError as exc:
            raise SandboxError(f"Docker refused the sandbox container: {_explain(exc)}") from None
        except docker.errors.DockerException as exc:
            raise SandboxError(f"Docker failed: {exc}", retryable=True) from None

    return wrapper


def _vanished() -> SandboxError:
    return SandboxError(
        "The sandbox container was removed while its program ran "
        "(by `sandcrew sandbox gc` or another process); run the code again",
        retryable=True,
    )


def _explain(exc: docker.errors.APIError) -> str:
    return str(exc.explanation or exc)


def _in_thread(function: Callable[..., _T], *args: Any) -> asyncio.Future[_T]:
    """Run a blocking call on a thread of its own and return an awaitable for its result.

    Own threads, not the loop's default executor: calls that block until a
    program ends must never starve the calls (kill, remove) that end programs.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()

    def deliver(outcome: Callable[[], None]) -> None:
        if not future.done():
            outcome()

    def work() -> None:
        try:
            result = function(*args)
        except BaseException as exc:  # handed to the awaiting task
            error = exc
            _call_soon(loop, deliver, lambda: future.set_exception(error))
        else:
            _call_soon(loop, deliver, lambda: future.set_result(result))

    threading.Thread(target=work, name="sandcrew-docker", daemon=True).start()
    return future


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[..., None], *args: Any) -> None:
    # A closed loop means nobody waits for this result any more.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback, *args)
