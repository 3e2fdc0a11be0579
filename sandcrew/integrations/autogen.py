"""AutoGen 0.4+: two autogen-core code executors on sandcrew.

``SandcrewCodeExecutor`` runs every code block in a new hardened throwaway container (no
network, capped time, memory, processes and output) instead of AutoGen's long-lived
Docker container, so ``CodeExecutorAgent`` and ``PythonCodeExecutionTool`` can run
model-written code safely::

    from autogen_agentchat.agents import CodeExecutorAgent
    from sandcrew.integrations.autogen import SandcrewCodeExecutor

    async with SandcrewCodeExecutor() as executor:
        agent = CodeExecutorAgent("runner", code_executor=executor)

``SandcrewSessionExecutor`` is the stateful counterpart of autogen-ext's
``DockerJupyterCodeExecutor``: one sandcrew session (a live IPython interpreter in one
hardened container) for all its blocks, so variables survive between
``execute_code_blocks`` calls, and images the blocks display come back as files.

Needs ``pip install 'sandcrew[autogen]'``.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel

from sandcrew._extras import MissingExtraError
from sandcrew.core import UserError
from sandcrew.sandbox import (
    CellResult,
    DockerSandbox,
    SandboxConfig,
    SandboxWithSessions,
    SessionLimits,
)
from sandcrew.sandbox._lazy_session import LazySession
from sandcrew.sandbox.code import normalize_language

try:
    from autogen_core import CancellationToken, Component
    from autogen_core.code_executor import CodeBlock, CodeExecutor, CodeResult
except ImportError as missing:
    raise MissingExtraError("sandcrew.integrations.autogen", "autogen-core", "autogen") from missing

UNSUPPORTED_EXIT_CODE = 1
"""What AutoGen's own executors answer for a block in a language they do not run."""


class SandcrewCodeExecutorConfig(BaseModel):
    """The declarative form of a :class:`SandcrewCodeExecutor` (AutoGen's component config)."""

    sandbox: dict[str, Any] = {}
    """:class:`~sandcrew.sandbox.SandboxConfig` fields; unset ones keep their defaults."""


class SandcrewCodeExecutor(CodeExecutor, Component[SandcrewCodeExecutorConfig]):
    """Runs AutoGen code blocks, each in a new hardened throwaway sandcrew container.

    Blocks run in order, as AutoGen's command-line executors run them: their outputs
    (stdout, then stderr) are joined and the first block that fails ends the run with
    its exit code. A block that runs out of time gives exit code 124 and an output that
    ends with ``Timeout``, as AutoGen's executors report it; one killed for memory gives 137.
    Nothing is kept between blocks: each is a fresh container.

    ``start`` connects to Docker; ``stop`` waits for the last containers to be removed.
    """

    component_type = "code_executor"
    component_config_schema = SandcrewCodeExecutorConfig
    component_provider_override: ClassVar[str | None] = (
        "sandcrew.integrations.autogen.SandcrewCodeExecutor"
    )

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self._sandbox = DockerSandbox(config)

    @property
    def sandbox(self) -> DockerSandbox:
        return self._sandbox

    @property
    def supported_languages(self) -> tuple[str, ...]:
        return self._sandbox.supported_languages

    async def execute_code_blocks(
        self, code_blocks: Sequence[CodeBlock], cancellation_token: CancellationToken
    ) -> CodeResult:
        outputs: list[str] = []
        exit_code = 0
        for block in code_blocks:
            language = normalize_language(block.language)
            if language is None or language not in self.supported_languages:
                outputs.append(
                    f"Unsupported language {block.language!r}: "
                    f"this executor runs {', '.join(self.supported_languages)}"
                )
                exit_code = UNSUPPORTED_EXIT_CODE
                break
            run = asyncio.ensure_future(self._sandbox.run(block.code, language))
            cancellation_token.link_future(run)
            result = await run
            exit_code = result.posix_exit_code
            output = result.combined_output()
            if result.timed_out:
                output += f"\n Timeout (the block ran longer than {result.timeout:g}s)"
            outputs.append(output)
            if exit_code != 0:
                break
        return CodeResult(exit_code=exit_code, output="".join(outputs))

    async def start(self) -> None:
        await self._sandbox.start()

    async def stop(self) -> None:
        await self._sandbox.aclose()

    async def restart(self) -> None:
        """Nothing outlives a block, so there is nothing to reset; the executor stays usable."""
        await self.start()

    def _to_config(self) -> SandcrewCodeExecutorConfig:
        return SandcrewCodeExecutorConfig(
            sandbox=self._sandbox.config.model_dump(mode="json", exclude_defaults=True)
        )

    @classmethod
    def _from_config(cls, config: SandcrewCodeExecutorConfig) -> Self:
        return cls(SandboxConfig.model_validate(config.sandbox))


SAVED_MEDIA_TYPES = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/svg+xml": ".svg",
    "text/html": ".html",
}
"""Display outputs a :class:`SandcrewSessionExecutor` saves as files (as autogen-ext's does)."""


@dataclass
class SessionCodeResult(CodeResult):
    """A :class:`CodeResult` with the files the blocks' display outputs were saved to."""

    output_files: list[Path] = field(default_factory=list)


class SandcrewSessionExecutorConfig(BaseModel):
    """The declarative form of a :class:`SandcrewSessionExecutor`."""

    sandbox: dict[str, Any] = {}
    """:class:`~sandcrew.sandbox.SandboxConfig` fields; unset ones keep their defaults."""
    limits: dict[str, Any] = {}
    """:class:`~sandcrew.sandbox.SessionLimits` fields (cell timeout, idle timeout...)."""
    output_dir: str | None = None


class SandcrewSessionExecutor(CodeExecutor, Component[SandcrewSessionExecutorConfig]):
    """Runs AutoGen's Python code blocks in one live interpreter, kept between calls.

    The counterpart of autogen-ext's ``DockerJupyterCodeExecutor`` on a sandcrew session:
    one hardened container (no network, capped memory, processes and output) holding an
    IPython interpreter from :meth:`start` to :meth:`stop`. Blocks run in order; the
    first that raises ends the call with exit code 1 and its traceback. Display outputs
    (figures, images, HTML) are saved into ``output_dir`` (a temporary folder by default)
    and their paths listed in the output and in ``output_files``; text results are shown
    as in a notebook. A block that reaches the cell timeout is interrupted (exit code 124,
    the state kept); if the interpreter had to be restarted, the output says so.
    :meth:`restart` gives a fresh interpreter (files in the work dir stay).

    The session is held by a :class:`~sandcrew.sandbox.DockerSandbox` made from
    ``config``, or by ``sandbox`` (another backend, a test double) instead; an executor
    on a sandbox of its own has no declarative form.
    """

    component_type = "code_executor"
    component_config_schema = SandcrewSessionExecutorConfig
    component_provider_override: ClassVar[str | None] = (
        "sandcrew.integrations.autogen.SandcrewSessionExecutor"
    )

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        limits: SessionLimits | None = None,
        output_dir: Path | str | None = None,
        sandbox: SandboxWithSessions | None = None,
    ) -> None:
        if sandbox is not None and config is not None:
            raise UserError("give the executor a config or a sandbox, not both")
        self._config = config if config is not None else SandboxConfig()
        self._given_sandbox = sandbox is not None
        self._sandbox = sandbox if sandbox is not None else DockerSandbox(self._config)
        self._limits = limits if limits is not None else SessionLimits()
        self._output_dir = Path(output_dir) if output_dir is not None else None
        self._cells = LazySession(self._sandbox, "python", limits=self._limits)

    @property
    def sandbox(self) -> SandboxWithSessions:
        return self._sandbox

    @property
    def output_dir(self) -> Path:
        """Where display outputs are saved (made by :meth:`start` when not given)."""
        if self._output_dir is None:
            self._output_dir = Path(tempfile.mkdtemp(prefix="sandcrew-autogen-"))
        return self._output_dir

    @property
    def supported_languages(self) -> tuple[str, ...]:
        return ("python",)

    async def start(self) -> None:
        current = self._cells.current
        if current is not None and current.closed:
            self._cells = LazySession(self._sandbox, "python", limits=self._limits)
        await self._cells.open()
        self.output_dir.mkdir(parents=True, exist_ok=True)

    async def stop(self) -> None:
        await self._cells.aclose()

    async def restart(self) -> None:
        """A fresh interpreter: variables and imports are gone, files stay."""
        await self._cells.restart()

    async def execute_code_blocks(
        self, code_blocks: Sequence[CodeBlock], cancellation_token: CancellationToken
    ) -> SessionCodeResult:
        await self.start()
        session = await self._cells.open()
        outputs: list[str] = []
        files: list[Path] = []
        for block in code_blocks:
            if normalize_language(block.language) != "python":
                outputs.append(
                    f"Unsupported language {block.language!r}: this executor runs python"
                )
                return SessionCodeResult(UNSUPPORTED_EXIT_CODE, "\n".join(outputs), files)
            cell = asyncio.ensure_future(session.run(block.code))
            cancellation_token.link_future(cell)
            try:
                result = await cell
            except asyncio.CancelledError:
                await session.interrupt()  # the cell would otherwise run on to its limit
                raise
            text, saved = self._read(result)
            outputs.append(text)
            files += saved
            if result.exit_code != 0:
                return SessionCodeResult(result.exit_code, "\n".join(outputs), files)
        return SessionCodeResult(0, "\n".join(outputs), files)

    def _read(self, result: CellResult) -> tuple[str, list[Path]]:
        """The cell's text as AutoGen's Jupyter executor gives it, and the files saved."""
        parts = [result.stdout + result.stderr]
        saved: list[Path] = []
        for output in result.outputs:
            for media_type, suffix in SAVED_MEDIA_TYPES.items():
                data = output.data.get(media_type)
                if data is not None:
                    path = self.output_dir / f"{uuid.uuid4().hex}{suffix}"
                    path.write_bytes(data if isinstance(data, bytes) else data.encode())
                    saved.append(path)
                    parts.append(f"{media_type} saved to {path}\n")
                    break
            else:
                text = output.text()
                if text is not None:
                    parts.append(text + "\n")
        if result.error is not None:
            parts.append(f"{result.error.traceback or result.error.name}\n")
        if result.timed_out:
            parts.append(f"Timeout (the cell ran longer than {self._limits.cell_timeout:g}s)\n")
        parts += [note + "\n" for note in result.notes()]
        return "".join(parts), saved

    def _to_config(self) -> SandcrewSessionExecutorConfig:
        if self._given_sandbox:
            raise UserError(
                "an executor on a sandbox of its own has no declarative form; "
                "make it from a SandboxConfig to dump it"
            )
        return SandcrewSessionExecutorConfig(
            sandbox=self._config.model_dump(mode="json", exclude_defaults=True),
            limits=self._limits.model_dump(mode="json", exclude_defaults=True),
            output_dir=None if self._output_dir is None else str(self._output_dir),
        )

    @classmethod
    def _from_config(cls, config: SandcrewSessionExecutorConfig) -> Self:
        return cls(
            SandboxConfig.model_validate(config.sandbox),
            limits=SessionLimits.model_validate(config.limits),
            output_dir=config.output_dir,
        )


__all__ = [
    "SandcrewCodeExecutor",
    "SandcrewCodeExecutorConfig",
    "SandcrewSessionExecutor",
    "SandcrewSessionExecutorConfig",
    "SessionCodeResult",
]
