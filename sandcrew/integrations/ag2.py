"""AG2 1.x: ``SandcrewSandboxFactory``, a sandbox backend for ``ag2.tools.sandbox``.

AG2's code and shell tools (``CodeAdapter``, ``SandboxCodeTool``, ``SandboxShellTool``)
run on a ``SandboxFactory`` that opens a ``Sandbox`` per call. This factory opens a
:class:`SandcrewSandbox`, whose every ``exec`` runs in a new hardened throwaway sandcrew
container (no network, capped time, memory, processes and output)::

    from ag2.tools import SandboxCodeTool
    from sandcrew.integrations.ag2 import SandcrewSandboxFactory

    code_tool = SandboxCodeTool(SandcrewSandboxFactory(), languages=("python", "bash"))

``SandcrewSessionFactory`` opens one persistent :class:`SandcrewSessionSandbox` instead:
a single hardened container (a sandcrew session) that lives from the factory's first
``open`` to its ``aclose``, so files, folders and installed modules in the working
directory persist from one tool call to the next. AG2's layer runs every snippet and
command as a new process (``python file.py``, ``sh -c``), so an interpreter's variables
do not carry over through it on any backend; for that, use a sandcrew session directly.

Needs ``pip install 'sandcrew[ag2]'``.
"""

from __future__ import annotations

import abc
import base64
import re
import shlex
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Self

from sandcrew._extras import MissingExtraError
from sandcrew.core import AsyncResource
from sandcrew.sandbox import (
    DockerSandbox,
    Sandbox,
    SandboxConfig,
    SandboxWithSessions,
    Session,
    SessionLimits,
)
from sandcrew.sandbox._lazy_session import LazySession
from sandcrew.sandbox._result import TIMEOUT_EXIT_CODE

try:
    from ag2.tools.sandbox import ExecResult, SandboxBase
except ImportError as missing:
    raise MissingExtraError("sandcrew.integrations.ag2", "ag2", "ag2") from missing

if TYPE_CHECKING:
    from ag2.context import ConversationContext

USAGE_EXIT_CODE = 2
"""What AG2's backends answer for an empty command."""

_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _SharedOnCopy:
    """AG2 deep-copies the tools given to an agent; the copy of a handle on a Docker
    connection is the same handle (as AG2's own Docker backend does)."""

    def __deepcopy__(self, memo: dict[int, object]) -> Self:
        return self


class _InContainer(_SharedOnCopy, SandboxBase):
    """What both opened sandboxes share: a working directory inside the container (never
    on the host), the variable names a command may set, and how a timeout is told."""

    def __init__(self, workdir: PurePosixPath) -> None:
        self._workdir = workdir

    @property
    def workdir(self) -> PurePosixPath:
        return self._workdir

    @property
    def host_workdir(self) -> Path | None:
        return None  # the working directory is a tmpfs inside the container

    @staticmethod
    def _check_variables(env: dict[str, str]) -> None:
        for name in env:
            if not _VARIABLE_NAME.match(name):
                raise ValueError(f"environment variable names are letters, digits and _ ({name!r})")

    @staticmethod
    def _result(output: str, exit_code: int, *, timed_out: bool, limit: float) -> ExecResult:
        output = output.strip()
        if timed_out:
            output = f"{output}\nExecution timed out after {limit:g}s".strip()
        return ExecResult(output=output, exit_code=exit_code)


class SandcrewSandbox(_InContainer):
    """One opened sandbox: each ``exec`` is a new container, files put here go with it.

    Containers are throwaway, so the files given to :meth:`put_file` live in this object
    and are written into the working directory of every later ``exec`` of the same
    opened sandbox (they count towards the sandbox's program-size limit).
    """

    def __init__(self, sandbox: Sandbox, workdir: PurePosixPath) -> None:
        super().__init__(workdir)
        self._sandbox = sandbox
        self._files: dict[PurePosixPath, bytes] = {}
        self._closed = False

    async def exec(
        self,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109  (the program's limit, as AG2 defines it)
    ) -> ExecResult:
        """Run ``argv`` in a new container; combined output, 124 on timeout (AG2's contract)."""
        self._check_open()
        if not argv:
            return ExecResult(output="", exit_code=USAGE_EXIT_CODE)
        program = self._program(argv, env or {})
        result = await self._sandbox.run(program, "bash", timeout=timeout)
        return self._result(
            result.combined_output(),
            result.posix_exit_code,
            timed_out=result.timed_out,
            limit=result.timeout,
        )

    async def put_file(self, path: PurePosixPath, content: bytes) -> None:
        self._check_open()
        self._files[_relative(path)] = bytes(content)

    async def remove_file(self, path: PurePosixPath) -> None:
        self._check_open()
        self._files.pop(_relative(path), None)

    async def aclose(self) -> None:
        self._closed = True
        self._files.clear()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("This SandcrewSandbox is closed; open another from the factory")

    def _program(self, argv: list[str], env: dict[str, str]) -> str:
        lines = [f"cd {shlex.quote(str(self.workdir))} || exit 1"]
        for path, content in self._files.items():
            target = shlex.quote(str(path))
            encoded = base64.b64encode(content).decode("ascii")
            if path.parent != PurePosixPath("."):
                lines.append(f"mkdir -p {shlex.quote(str(path.parent))}")
            lines.append(f"printf '%s' {encoded} | base64 -d > {target} || exit 1")
        self._check_variables(env)
        lines.extend(f"export {name}={shlex.quote(value)}" for name, value in env.items())
        # AG2 runs Python as `python`; images that only have python3 still answer to it.
        lines.append('command -v python >/dev/null 2>&1 || python() { python3 "$@"; }')
        lines.append(shlex.join(argv))
        return "\n".join(lines) + "\n"


class _Factory(_SharedOnCopy, AsyncResource):
    """What both factories share: a sandbox started on entry, and a copy that is itself."""

    @property
    @abc.abstractmethod
    def sandbox(self) -> Sandbox:
        """The sandbox the opened sandboxes run on."""

    async def start(self) -> None:
        await self.sandbox.start()


class SandcrewSandboxFactory(_Factory):
    """AG2 ``SandboxFactory`` (and ``WorkdirAware``) opening :class:`SandcrewSandbox` es.

    One :class:`~sandcrew.sandbox.DockerSandbox` made from ``config`` serves every
    sandbox it opens; another :class:`~sandcrew.sandbox.Sandbox` (a test double, another
    backend) may be given instead, ``config`` then only naming the working directory.
    Close the factory (or use ``async with``) to wait for the last containers to be removed.
    """

    def __init__(
        self, config: SandboxConfig | None = None, *, sandbox: Sandbox | None = None
    ) -> None:
        settings = config if config is not None else SandboxConfig()
        self._sandbox: Sandbox = sandbox if sandbox is not None else DockerSandbox(settings)
        self._workdir = PurePosixPath(settings.workdir)

    @property
    def sandbox(self) -> Sandbox:
        return self._sandbox

    @property
    def workdir(self) -> PurePosixPath:
        return self._workdir

    @asynccontextmanager
    async def open(
        self, context: ConversationContext | None = None
    ) -> AsyncIterator[SandcrewSandbox]:
        """A sandbox for one tool call; nothing to resolve from ``context``."""
        del context
        opened = SandcrewSandbox(self._sandbox, self._workdir)
        try:
            yield opened
        finally:
            await opened.aclose()

    async def aclose(self) -> None:
        await self._sandbox.aclose()


def _relative(path: PurePosixPath) -> PurePosixPath:
    path = PurePosixPath(path)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise ValueError(f"paths are relative to the sandbox's working directory (got {path})")
    return path


class SandcrewSessionSandbox(_InContainer):
    """An AG2 sandbox on one sandcrew session: files persist between ``exec`` calls.

    Each ``exec`` runs ``argv`` as a command beside the session's interpreter, in the
    working directory; its combined output and exit code come back (124 when AG2's
    timeout ended it, 127 when the command is not there). Opened and closed by
    :class:`SandcrewSessionFactory`; :meth:`aclose` here is a no-op, so that AG2 closing
    the sandbox after a call keeps it for the next.
    """

    def __init__(self, session: Session, *, workdir: str, default_timeout: float) -> None:
        super().__init__(PurePosixPath(workdir))
        self._session = session
        self._default_timeout = default_timeout

    async def exec(
        self,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109  (the command's limit, as AG2 defines it)
    ) -> ExecResult:
        if not argv:
            return ExecResult(output="", exit_code=USAGE_EXIT_CODE)
        self._check_variables(env or {})
        limit = self._default_timeout if timeout is None else timeout
        # The images have python3; AG2's code tool calls it python.
        command = [*(["python3"] if argv[0] == "python" else argv[:1]), *argv[1:]]
        result = await self._session.run_command(
            shlex.join(command), env=dict(env or {}), timeout=limit
        )
        return self._result(
            result.stdout + result.stderr,
            TIMEOUT_EXIT_CODE if result.timed_out else result.exit_code,
            timed_out=result.timed_out,
            limit=limit,
        )

    async def put_file(self, path: PurePosixPath, content: bytes) -> None:
        await self._session.put_file(str(_relative(path)), bytes(content))

    async def remove_file(self, path: PurePosixPath) -> None:
        if await self._session.stat_file(str(_relative(path))) is not None:
            await self._session.remove_file(str(_relative(path)))

    async def aclose(self) -> None:
        """Kept open for the next call; the factory closes it."""


class SandcrewSessionFactory(_Factory):
    """AG2 ``SandboxFactory`` whose every ``open`` yields the same persistent sandbox.

    The session (one hardened container) starts at the first ``open`` and ends with
    :meth:`aclose` (or leaving ``async with``), which removes its container; the session's
    own idle timeout and lifetime (:class:`~sandcrew.sandbox.SessionLimits`) apply too.

    A :class:`~sandcrew.sandbox.DockerSandbox` made from ``config`` holds the session;
    another sandbox that holds sessions (a test double, another backend) may be given
    instead, ``config`` then only naming the working directory and a command's default
    time limit.
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        limits: SessionLimits | None = None,
        sandbox: SandboxWithSessions | None = None,
    ) -> None:
        self._config = config if config is not None else SandboxConfig()
        self._sandbox = sandbox if sandbox is not None else DockerSandbox(self._config)
        self._limits = limits if limits is not None else SessionLimits()
        self._cells = LazySession(self._sandbox, "python", limits=self._limits)
        self._opened: SandcrewSessionSandbox | None = None

    @property
    def sandbox(self) -> SandboxWithSessions:
        return self._sandbox

    @property
    def workdir(self) -> PurePosixPath:
        return PurePosixPath(self._config.workdir)

    @asynccontextmanager
    async def open(
        self, context: ConversationContext | None = None
    ) -> AsyncIterator[SandcrewSessionSandbox]:
        """The persistent sandbox (started on first use); nothing to resolve from ``context``."""
        del context
        current = self._cells.current
        if current is not None and current.closed:
            self._cells = LazySession(self._sandbox, "python", limits=self._limits)
            self._opened = None
        session = await self._cells.open()
        if self._opened is None:
            self._opened = SandcrewSessionSandbox(
                session, workdir=self._config.workdir, default_timeout=self._config.timeout
            )
        yield self._opened

    async def aclose(self) -> None:
        self._opened = None
        await self._cells.aclose()


__all__ = [
    "SandcrewSandbox",
    "SandcrewSandboxFactory",
    "SandcrewSessionFactory",
    "SandcrewSessionSandbox",
]
