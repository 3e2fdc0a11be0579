"""The MCP tools as typed functions: their ``@function`` contracts are the schemas clients see.

The contracts are built per server, from its :class:`ServerLimits`, so that the limits a
client may not exceed are part of each schema (``maximum``, ``enum``) and a call asking
for more is refused by the same validation that checks the argument types.
"""

# No `from __future__ import annotations`: the contracts read the limits from the
# closure at definition time, which string annotations could not see.

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from sandcrew.crew import CrewResult
from sandcrew.functions import FunctionTool, function
from sandcrew.sandbox import CellResult, ExecutionResult, FileEntry
from sandcrew.settings import McpSettings

if TYPE_CHECKING:  # the toolbox imports these contracts
    from sandcrew.mcp._toolbox import SandboxToolbox

MIB = 1024 * 1024
MIN_MEMORY_MIB = 16
"""Smallest memory limit a client may ask for; below it the interpreter cannot start."""


class ServerLimits(BaseModel):
    """What the server allows a client: fixed when the server starts, never raised by a call."""

    model_config = ConfigDict(frozen=True)

    max_timeout: float = Field(gt=0)
    """Longest wall-clock limit of one run, seconds; also the default."""
    max_memory_bytes: int = Field(ge=MIN_MEMORY_MIB * MIB)
    """Largest memory limit of one run; also the default."""
    allow_network: bool = False
    """Whether a client may ask for network access (runs are offline unless asked)."""
    allowed_hosts: tuple[str, ...] = ()
    """Hosts a client may let a run or a session reach through the proxy, each as the
    server's ``--allow-host`` (or ``--secret-header``) wrote it: the ceiling a client
    narrows, never widens."""
    sessions: McpSettings = Field(default_factory=McpSettings)
    """The session caps and timeouts (the ``[mcp]`` table and the server's flags)."""


class LanguagesResult(BaseModel):
    """The languages ``run_code`` accepts and the limits that apply to every run."""

    languages: list[str]
    default_language: str
    max_timeout: float
    max_memory_mb: int
    network_allowed: bool
    allowed_hosts: list[str]
    """What ``allow_hosts`` of run_code and session_create may name."""


class SessionInfo(BaseModel):
    """A live interpreter of this client, kept between calls until closed or expired."""

    session_id: str
    language: str
    cells: int
    """Cells run so far."""
    cell_timeout: float
    """Longest a cell may run, seconds (a cell may ask for less)."""
    idle_timeout: float
    """The session is closed after this many seconds without a call."""
    lifetime: float
    """The session is closed this many seconds after it was created."""


class SessionList(BaseModel):
    """This client's open sessions."""

    sessions: list[SessionInfo]
    max_sessions: int


class FileResult(BaseModel):
    """A file of a session's work dir."""

    name: str
    size: int
    text: str | None
    """The content, when it is UTF-8 text."""
    data_base64: str | None
    """The content base64-encoded, when it is not UTF-8 text."""


class FileListing(BaseModel):
    """A folder of a session's work dir."""

    path: str
    entries: list[FileEntry]


class Done(BaseModel):
    """The request was carried out."""

    done: bool = True


def _timeout_field(limits: ServerLimits, what: str, *, then: str = "") -> Any:
    """A ``timeout`` argument: positive, at most the server's limit (also its default)."""
    return Field(
        gt=0,
        le=limits.max_timeout,
        description=f"{what}, at most {limits.max_timeout:g} (the default){then}.",
    )


def _hosts_field(limits: ServerLimits, what: str) -> Any:
    """The ``allow_hosts`` argument: a choice among the server's hosts, never more."""
    note = (
        f"Hosts this {what} may reach through the server's proxy, chosen from: "
        f"{', '.join(limits.allowed_hosts)} (none unless named; not with network)."
        if limits.allowed_hosts
        else f"Hosts this {what} may reach; this server allows none, so only [] is accepted."
    )
    hosts = list(limits.allowed_hosts)

    def only_these(schema: dict[str, Any]) -> None:
        for option in schema.get("anyOf", [schema]):
            if option.get("type") == "array":
                option["items"] = {"type": "string", "enum": hosts}

    return Field(description=note, json_schema_extra=only_these)


def tool_contracts(
    limits: ServerLimits, toolbox: "SandboxToolbox", *, with_solve: bool
) -> list[FunctionTool[..., Any]]:
    """The tools a server with ``limits`` offers; ``solve`` only when a model is configured."""
    max_memory_mib = limits.max_memory_bytes // MIB
    network_values = [False, True] if limits.allow_network else [False]

    network_note = (
        "Allow network access for this run (off unless asked)."
        if limits.allow_network
        else "Network access; this server does not allow it, so only false is accepted."
    )

    @function(strict=False)
    async def run_code(
        code: Annotated[str, Field(description="The program's source text.")],
        language: Annotated[
            str, Field(description="The program's language; list_languages() names them.")
        ] = "python",
        timeout: Annotated[  # noqa: ASYNC109  (the program's limit, enforced by the sandbox)
            float | None, _timeout_field(limits, "Wall-clock limit in seconds")
        ] = None,
        memory_mb: Annotated[
            int | None,
            Field(
                ge=MIN_MEMORY_MIB,
                le=max_memory_mib,
                description=f"Memory limit in MiB, at most {max_memory_mib} (the default).",
            ),
        ] = None,
        network: Annotated[
            bool, Field(description=network_note, json_schema_extra={"enum": network_values})
        ] = False,
        files: Annotated[
            dict[str, str] | None,
            Field(
                description=(
                    "Text files put into the program's working directory before it starts, "
                    "read-only: relative name (e.g. data/input.csv) to its UTF-8 content."
                )
            ),
        ] = None,
        allow_hosts: Annotated[list[str] | None, _hosts_field(limits, "run")] = None,
    ) -> ExecutionResult:
        """Run a program in a new, hardened, throwaway container and report what it did.

        The program's own failure (non-zero exit code, timeout, out-of-memory kill) is
        reported in the result; stdout and stderr are capped and flagged when truncated.
        Files the program writes into the folder out/ of its working directory come back
        in artifacts (with their bytes, base64, up to 1 MiB each).
        """
        return await toolbox.run_code(
            code,
            language,
            timeout=timeout,
            memory_bytes=None if memory_mb is None else memory_mb * MIB,
            network=network,
            files=files,
            allow_hosts=tuple(allow_hosts or ()),
        )

    @function(strict=False)
    def list_languages() -> LanguagesResult:
        """The languages run_code accepts, and the limits every run is held to."""
        return toolbox.list_languages()

    tools: list[FunctionTool[..., Any]] = [run_code, list_languages]
    if limits.sessions.max_sessions:
        tools += session_contracts(limits, toolbox)
    if with_solve:

        @function(strict=False)
        async def solve(
            task: Annotated[
                str, Field(description='The task, e.g. "What\'s the 39th Fibonacci number?"')
            ],
        ) -> CrewResult:
            """Let sandcrew's crew (coder, reviewer, runner) solve a task by writing and
            running code; returns the answer, why the chat stopped and every run (the
            document `sandcrew solve --json` prints)."""
            return await toolbox.solve(task)

        tools.append(solve)
    return tools


SessionId = Annotated[str, Field(description="The id session_create returned.")]


def session_contracts(
    limits: ServerLimits, toolbox: "SandboxToolbox"
) -> list[FunctionTool[..., Any]]:
    """The tools that keep a live interpreter between calls (run_code stays stateless)."""

    create_description = (
        "Start a session: a live interpreter in a new hardened container, kept between "
        "calls. Variables, imports, the working directory and files persist from one "
        f"session_run to the next. A client holds at most {limits.sessions.max_sessions} sessions; "
        f"each is closed after {limits.sessions.session_idle_timeout:g}s without a call, "
        f"{limits.sessions.session_lifetime:g}s after it started, or when the client disconnects. "
        "Close it with session_close when done."
    )

    @function(strict=False, description=create_description)
    async def session_create(
        language: Annotated[
            str, Field(description="The interpreter: python, bash or javascript.")
        ] = "python",
        allow_hosts: Annotated[list[str] | None, _hosts_field(limits, "session")] = None,
    ) -> SessionInfo:
        return await toolbox.session_create(language, allow_hosts=tuple(allow_hosts or ()))

    @function(strict=False)
    async def session_run(
        session_id: SessionId,
        code: Annotated[str, Field(description="The cell's source text.")],
        timeout: Annotated[  # noqa: ASYNC109  (the cell's limit, enforced by the session)
            float | None,
            _timeout_field(
                limits,
                "Seconds the cell may run",
                then="; then it is interrupted and the session's state is kept",
            ),
        ] = None,
    ) -> CellResult:
        """Run a cell in a session, as in a notebook: earlier cells' variables are there.

        Reports stdout and stderr, display outputs (the last expression's value, display()
        calls, matplotlib figures as image/png in base64, entries over 1 MiB named in
        omitted), the exception if the cell raised, and state_lost when the interpreter had
        to be replaced (variables gone, files kept).
        """
        return await toolbox.session_run(session_id, code, timeout=timeout)

    @function(strict=False)
    async def session_put_file(
        session_id: SessionId,
        name: Annotated[
            str, Field(description="Relative path in the session's working directory.")
        ],
        text: Annotated[str | None, Field(description="The content, as UTF-8 text.")] = None,
        data_base64: Annotated[
            str | None, Field(description="The content, base64-encoded (instead of text).")
        ] = None,
    ) -> Done:
        """Write a file into a session's working directory (replacing one of the same name)."""
        return await toolbox.session_put_file(session_id, name, text=text, data_base64=data_base64)

    @function(strict=False)
    async def session_get_file(
        session_id: SessionId,
        name: Annotated[
            str, Field(description="Relative path in the session's working directory.")
        ],
    ) -> FileResult:
        """Read a file of a session's working directory (text, or base64 when it is binary)."""
        return await toolbox.session_get_file(session_id, name)

    @function(strict=False)
    async def session_list_files(
        session_id: SessionId,
        path: Annotated[
            str, Field(description="A folder of the working directory; . is the directory.")
        ] = ".",
    ) -> FileListing:
        """List a folder of a session's working directory."""
        return await toolbox.session_list_files(session_id, path)

    @function(strict=False)
    async def session_close(session_id: SessionId) -> Done:
        """Close a session: its interpreter ends and its container is removed."""
        return await toolbox.session_close(session_id)

    @function(strict=False)
    def session_list() -> SessionList:
        """This client's open sessions."""
        return toolbox.session_list()

    return [
        session_create,
        session_run,
        session_put_file,
        session_get_file,
        session_list_files,
        session_close,
        session_list,
    ]
