"""The runner: no model; runs the coder's last code block in a throwaway container."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sandcrew.agents import BaseAgent, GenerateReplyOptions, Message, TextMessage
from sandcrew.crew._code_facts import RUNNABLE_LANGUAGES, code_to_run
from sandcrew.sandbox import ExecutionResult, Sandbox

NO_CODE_REPLY = "No code available. Coder please write code"


class RunnerAgent(BaseAgent):
    """Replies ``[RUNNER_RESULT]`` with the run's outcome attached as ``data``.

    Only the last message from ``coder_name`` is looked at. A block that is not
    python, bash or javascript is not run; the reply says so and the coder is asked again.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        name: str = "runner",
        coder_name: str = "coder",
        max_output_chars: int = 4000,
        description: str | None = "Runs the coder's code in a throwaway container.",
        files: Mapping[str, bytes] | None = None,
    ) -> None:
        super().__init__(name, description=description)
        self._sandbox = sandbox
        self._files = dict(files or {})
        """Input files every run receives in its work dir."""
        self._coder_name = coder_name
        self._max_output_chars = max_output_chars
        self.runs: list[ExecutionResult] = []
        """Every run this runner made, in order (for reports and transcripts)."""

    async def generate_reply(
        self, messages: Sequence[Message], options: GenerateReplyOptions | None = None
    ) -> Message:
        from_coder = [message for message in messages if message.sender == self._coder_name]
        block = code_to_run(from_coder[-1].content) if from_coder else None
        if block is None or block.language not in RUNNABLE_LANGUAGES:
            return TextMessage(content=NO_CODE_REPLY, sender=self.name)
        result = await self._sandbox.run(block.code, block.language, files=self._files or None)
        self.runs.append(result)
        return TextMessage(
            content=result.to_runner_message(self._max_output_chars),
            sender=self.name,
            data=result,
        )
