"""The code-interpreter crew: admin, coder, reviewer and runner in one group chat."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Self

import openai

from sandcrew.agents import (
    CHARS_PER_TOKEN,
    Agent,
    ChatResult,
    FunctionCallMiddleware,
    GroupChat,
    Message,
    MiddlewareAgent,
    ModelCallWatcher,
    OpenAIChatAgent,
    TextMessage,
    TokenMeter,
    TrimContextMiddleware,
    UnsignalledCompletion,
    final_answer,
    is_solved,
)
from sandcrew.crew._admin import CompletionMiddleware
from sandcrew.crew._code_facts import code_to_run
from sandcrew.crew._prompts import (
    ADMIN_PROMPT,
    INTRODUCTIONS,
    REVIEWER_PROMPT,
    coder_prompt,
    describe_run_files,
)
from sandcrew.crew._result import CrewResult
from sandcrew.crew._review import VerdictMiddleware, review_code_block
from sandcrew.crew._runner import RunnerAgent
from sandcrew.crew._settings import CrewMode, CrewSettings, ModelRole
from sandcrew.crew._workflow import crew_workflow
from sandcrew.sandbox import DockerSandbox, ExecutionResult, Sandbox

CONTEXT_RESERVED_FOR_REPLY = 1024
"""Tokens of the model's context left free for its reply."""

OnMessage = Callable[[Message], Awaitable[None] | None]
OnStopped = Callable[[CrewResult], None]


class Crew:
    """Builds the four agents and the chat for one set of settings (no I/O here).

    Use it as an async context manager (or call :meth:`aclose`) to close the model
    client it made; an injected ``client`` is left open for its owner.
    """

    def __init__(
        self,
        settings: CrewSettings,
        sandbox: Sandbox,
        *,
        client: openai.AsyncOpenAI | None = None,
        files: Mapping[str, bytes] | None = None,
        output_files: bool = False,
        packages: tuple[str, ...] | None = None,
        watcher: ModelCallWatcher | None = None,
    ) -> None:
        self.settings = settings
        self.watcher = watcher
        """Told when each model call starts and ends (``sandcrew solve`` shows who it waits for)."""
        self.files = dict(files or {})
        """Input files every run receives; the task tells the crew about them."""
        self._output_files = output_files
        self._owns_client = client is None
        self.client = client or settings.endpoint.client()
        # Every model request (speaker selection included) keeps within one token budget.
        self.token_meter = TokenMeter(settings.token_budget)
        self.admin = self._model_agent(
            "admin",
            ADMIN_PROMPT,
            "Gives the task and gives the final answer once a run answers it.",
            temperature=0,
        ).use(CompletionMiddleware())
        self.coder = self._model_agent(
            "coder",
            coder_prompt(packages),
            "Writes one Python code block that prints the result.",
            temperature=0.4,
        )
        reviewer_model = self._model_agent(
            "reviewer",
            REVIEWER_PROMPT,
            "Reviews the coder's code block before it runs.",
            temperature=0,
        )
        self.reviewer = reviewer_model.use(
            FunctionCallMiddleware(
                [review_code_block], required=True, max_attempts=settings.review_attempts
            ),
            # Without usable tools the same model reviews in plain text.
            VerdictMiddleware(coder_name="coder", text_reviewer=reviewer_model),
        )
        self.runner = RunnerAgent(
            sandbox,
            coder_name="coder",
            max_output_chars=settings.max_output_chars,
            files=self.files,
        )
        self.chat = self._group_chat()

    def _model_agent(
        self, role: ModelRole, prompt: str, description: str, *, temperature: float
    ) -> MiddlewareAgent:
        agent = OpenAIChatAgent(
            role,
            endpoint=self.settings.endpoint,
            model=self.settings.model_for(role),
            system_message=prompt,
            description=description,
            temperature=temperature,
            client=self.client,
            token_meter=self.token_meter,
            watcher=self.watcher,
        )
        return agent.use(self._context_fit(prompt))

    def _context_fit(self, prompt: str) -> TrimContextMiddleware:
        """Long run outputs trimmed, and the oldest turns left out when the chat outgrows
        the model's context (the introductions and the task always stay)."""
        settings = self.settings
        room = (settings.context_tokens - CONTEXT_RESERVED_FOR_REPLY) * CHARS_PER_TOKEN
        return TrimContextMiddleware(
            settings.max_output_chars,
            max_total_chars=max(room - len(prompt), settings.max_output_chars),
            keep_first=len(INTRODUCTIONS) + 1,
        )

    def _group_chat(self) -> GroupChat:
        members: list[Agent] = [self.admin, self.coder, self.reviewer, self.runner]
        mode = self.settings.mode
        workflow = (
            crew_workflow(self.admin, self.coder, self.reviewer, self.runner)
            if mode in (CrewMode.WORKFLOW, CrewMode.WORKFLOW_ADMIN)
            else None
        )
        selector: Agent | None = None
        if mode in (CrewMode.ADMIN, CrewMode.WORKFLOW_ADMIN):
            # Speaker selection has its own prompt (the role-play game), so it uses a plain
            # agent on the admin's model rather than the admin with its task instructions.
            selector = OpenAIChatAgent(
                "admin",
                endpoint=self.settings.endpoint,
                model=self.settings.model_for("admin"),
                client=self.client,
                token_meter=self.token_meter,
                watcher=self.watcher,
            ).use(self._context_fit(""))
        chat = GroupChat(
            members,
            admin=selector,
            workflow=workflow,
            token_budget=self.settings.token_budget,
            time_budget=self.settings.time_budget,
            stop_rules=[UnsignalledCompletion(finisher=self.admin.name, verified=_run_succeeded)],
        )
        for name, text in INTRODUCTIONS.items():
            chat.send_introduction(text, sender=name)
        return chat

    async def solve(
        self,
        task: str,
        *,
        on_message: OnMessage | None = None,
        on_stopped: OnStopped | None = None,
    ) -> CrewResult:
        """Run the chat on ``task`` to its end; ``on_message`` sees every new message.

        Cancelled (Ctrl-C), the solve tells ``on_stopped`` its outcome so far (stop reason
        ``caller_stopped``) before the cancellation goes on.
        """
        content = task + describe_run_files(self.files, output_files=self._output_files)
        opening = TextMessage(role="user", content=content, sender=self.admin.name)
        first_run = len(self.runner.runs)
        spent_before = self.token_meter.spent.total_tokens
        started = time.monotonic()
        stream = self.chat.send([opening], max_round=self.settings.max_rounds)
        try:
            if on_message is not None:
                await _deliver(on_message, opening)
            async for message in stream:
                if on_message is not None:
                    await _deliver(on_message, message)
        except asyncio.CancelledError:
            if on_stopped is not None:
                runs = self.runner.runs[first_run:]
                on_stopped(self._result(task, stream.result, started, runs, spent_before))
            raise
        runs = self.runner.runs[first_run:]
        return self._result(task, stream.result, started, runs, spent_before)

    async def aclose(self) -> None:
        """Close the model client if this crew made it."""
        if self._owns_client:
            await self.client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _result(
        self,
        task: str,
        chat: ChatResult,
        started: float,
        runs: list[ExecutionResult],
        spent_before: int,
    ) -> CrewResult:
        answer = final_answer(chat.stop_reason, chat.last_message)
        solved = is_solved(chat.stop_reason, sum(run.ok for run in runs))
        if solved and not answer and runs[-1].ok:
            answer = runs[-1].stdout.strip()
        # The meter also saw what the chat cannot: requests that ended the chat with an error
        # and requests abandoned when the time budget ran out (or the caller stopped).
        spent = self.token_meter.spent
        return CrewResult(
            task=task,
            solved=solved,
            answer=answer or None,
            stop_reason=chat.stop_reason,
            stop_detail=chat.detail,
            rounds=chat.rounds,
            total_tokens=max(chat.usage.total_tokens, spent.total_tokens - spent_before),
            tokens_estimated=chat.usage.estimated or spent.estimated,
            duration=time.monotonic() - started,
            runs=runs,
            last_code=_last_code(chat.messages, self.coder.name),
            notes=chat.notes,
            messages=chat.messages,
            exception=chat.error,
        )


def _run_succeeded(message: Message) -> bool:
    """A runner message whose program exited 0 in time (what the admin must answer)."""
    return isinstance(message.data, ExecutionResult) and message.data.ok


def _last_code(messages: list[Message], coder: str) -> str | None:
    for message in reversed(messages):
        if message.sender == coder and (block := code_to_run(message.content)) is not None:
            return block.code
    return None


async def _deliver(on_message: OnMessage, message: Message) -> None:
    outcome = on_message(message)
    if outcome is not None:
        await outcome


async def solve_task(
    task: str,
    settings: CrewSettings,
    *,
    sandbox: Sandbox | None = None,
    on_message: OnMessage | None = None,
    files: Mapping[str, bytes] | None = None,
    output_files: bool = False,
    watcher: ModelCallWatcher | None = None,
    on_stopped: OnStopped | None = None,
) -> CrewResult:
    """Solve ``task`` with a fresh crew; the sandbox is made (and closed) here if not given.

    ``files`` go into every run's work dir; with ``output_files`` the task also
    tells the crew that files written into ``out/`` are returned. With a Docker
    sandbox, the coder is told which Python packages the image has (when its
    label says). ``watcher`` is told when each model call starts and ends;
    ``on_stopped`` gets the outcome so far if the solve is cancelled (see :meth:`Crew.solve`).
    """
    crew_options = _CrewOptions(on_message, on_stopped, files, output_files, watcher)
    if sandbox is not None:
        return await _solve_in(task, settings, sandbox, crew_options)
    async with DockerSandbox(settings.sandbox) as owned:
        return await _solve_in(task, settings, owned, crew_options)


@dataclass(frozen=True)
class _CrewOptions:
    on_message: OnMessage | None
    on_stopped: OnStopped | None
    files: Mapping[str, bytes] | None
    output_files: bool
    watcher: ModelCallWatcher | None


async def _solve_in(
    task: str, settings: CrewSettings, sandbox: Sandbox, options: _CrewOptions
) -> CrewResult:
    packages = await sandbox.image_packages()
    async with Crew(
        settings,
        sandbox,
        files=options.files,
        output_files=options.output_files,
        packages=packages,
        watcher=options.watcher,
    ) as crew:
        return await crew.solve(task, on_message=options.on_message, on_stopped=options.on_stopped)
