"""AutoGen 0.4+: ``SandcrewCodeExecutor``, autogen-core's ``CodeExecutor`` on sandcrew.

Every code block runs in a new hardened throwaway container (no network, capped time,
memory, processes and output) instead of AutoGen's long-lived Docker container, so
``CodeExecutorAgent`` and ``PythonCodeExecutionTool`` can run model-written code
safely::

    from autogen_agentchat.agents import CodeExecutorAgent
    from sandcrew.integrations.autogen import SandcrewCodeExecutor

    async with SandcrewCodeExecutor() as executor:
        agent = CodeExecutorAgent("runner", code_executor=executor)

Needs ``pip install 'sandcrew[autogen]'``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar, Self

from pydantic import BaseModel

from sandcrew._extras import MissingExtraError
from sandcrew.integrations._outcome import TIMEOUT_EXIT_CODE, combined_output, posix_exit_code
from sandcrew.sandbox import DockerSandbox, SandboxConfig, normalize_language

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
            exit_code = posix_exit_code(result)
            output = combined_output(result)
            if exit_code == TIMEOUT_EXIT_CODE:
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


__all__ = ["SandcrewCodeExecutor", "SandcrewCodeExecutorConfig"]
