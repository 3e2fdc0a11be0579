"""An agent backed by any OpenAI-compatible Chat Completions endpoint.

Works with OpenAI, Azure, Ollama, vLLM, llama.cpp, LM Studio — anything that speaks
``/v1/chat/completions`` — through its :class:`ModelEndpoint` (``base_url``, key,
timeout, retries).

Tolerance of real endpoints:

* Retries (the endpoint's ``retries``, with backoff) cover 429, 5xx, refused connections and connect
  timeouts. A request that timed out while the server had it is **not** sent again: a local
  server that answers one request at a time would still be generating it. The error then
  says the endpoint is *slow* (raise the timeout), not *down* (start the server).
* ``tool_choice`` forms a server rejects with HTTP 400 (vLLM without auto tool choice
  rejects ``"auto"``, others reject forced choices) are replaced by another form that offers
  the same tools, and the agent remembers what worked. A server that supports no tools at
  all (Ollama: "... does not support tools") raises :class:`ToolsUnsupportedError`, at once
  on later requests.
* A call the server left in the text (``<tool_call>`` blocks, a bare ``{"name": ...,
  "arguments": ...}`` object) is read as a call to an offered function; arguments sent as a
  JSON object instead of a string are accepted; identical parallel calls count once.
* An empty reply is asked again ``empty_reply_retries`` times when the request offers no
  tools (with tools, :class:`~sandcrew.agents.FunctionCallMiddleware` decides) and otherwise
  raises :class:`EmptyReplyError`.
* A request whose turn structure the server's chat template refuses (Gemma and Mistral:
  "Conversation roles must alternate ..."; Gemma 2: "System role not supported", with any
  HTTP status), or whose roles do not alternate and that came back empty twice, is sent
  again in the alternating form (:func:`~._chat_format.in_form`); the form that worked is
  remembered per model in the :class:`ChatFormMemory` the agents of one endpoint share. The
  endpoint's ``chat_form`` setting forces a form instead.
* A text reply cut off at its length limit (``finish_reason="length"``) is asked again
  once, with a note that it was cut off and must be shorter; cut off again, it raises
  :class:`TruncatedReplyError`. Reasoning cut off before any visible text is returned as is
  (role-play speaker selection then gives the model room to think).
* Without ``usage`` in the answer, tokens are estimated (``Usage.estimated``); a shared
  :class:`TokenMeter` caps every request's ``max_tokens`` at what is left of the budget and
  also counts replies that ended in an error and abandoned requests.

Each such step is described in the reply's ``notes`` (kept in the transcript).

Message conversion (``_chat_format``): the agent's own messages become ``assistant`` messages (with
``tool_calls`` and ``tool`` results for its function calls); other agents' messages become
``user`` messages carrying the sender as ``name``; ``system`` text messages stay ``system``.
The agent's own ``system_message`` goes first only when the messages bring no system message
of their own (as AutoGen.NET does), so a caller such as role-play speaker selection can
replace it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any, Protocol

import openai
from openai.types.chat import ChatCompletion

from ..core import ConfigurationError, ErrorCode, InfrastructureError, UserError
from ._agent import BaseAgent, GenerateReplyOptions, ToolChoice
from ._chat_format import ChatForm, ChatFormMemory, alternates, in_form, to_chat_messages
from ._endpoint import ModelEndpoint
from ._endpoint_failures import (
    NO_TOOLS_WORDS,
    backoff,
    is_context_overflow,
    never_sent,
    refused_turns,
    retry_after,
    server_message,
    worth_retrying,
)
from ._messages import (
    Message,
    TextMessage,
    ToolCall,
    ToolCallMessage,
    Usage,
    add_usage,
)
from ._model_errors import (
    EmptyReplyError,
    EndpointTimeoutError,
    ModelReplyError,
    ToolsUnsupportedError,
    TruncatedReplyError,
)
from ._reasoning import is_unfinished_reasoning
from ._tokens import TokenMeter, estimate_prompt_tokens, estimate_tokens, estimated_usage
from ._tool_choice import choice_forms, choice_key, choice_label, offered_names, with_choice
from ._tool_text import calls_from_text, without_repeats

SHORTER_REPLY = (
    "Your last answer was cut off: it reached {limit}. Answer again, shorter: only what the "
    "task needs (one code block, no long explanations)."
)
"""Asked after a reply that was cut off at its length limit."""

AGENT_HEADER = "X-Sandcrew-Agent"
"""Every request names the calling agent in this header (scripted test servers match on it)."""


class _TurnsRefused(Exception):
    """The server's chat template refused the request's turn structure (see ``_reply``)."""

    def __init__(self, objection: str, detail: str) -> None:
        super().__init__(detail)
        self.objection = objection
        self.detail = detail


class ModelCallWatcher(Protocol):
    """Told when an agent starts waiting for its model and when the wait ends.

    ``call_ended`` follows every ``call_started``, whether the call answered, failed or was
    cancelled; retries and empty replies asked again belong to the one call.
    """

    def call_started(self, agent: str, model: str) -> None: ...

    def call_ended(self, agent: str, model: str) -> None: ...


class OpenAIChatAgent(BaseAgent):
    """A chat-model agent on ``endpoint`` (its ``model`` unless ``model`` is given).

    ``client`` may be injected (agents of one crew share one); otherwise the endpoint builds
    it. Without an endpoint the client falls back to the ``OPENAI_*`` environment variables.
    The client's ``max_retries`` is used, but the agent does the retrying itself (see the
    module doc). ``token_meter`` is shared by the agents that spend one token budget, and
    ``chat_forms`` by the agents of one endpoint.
    """

    def __init__(
        self,
        name: str,
        *,
        endpoint: ModelEndpoint | None = None,
        model: str | None = None,
        system_message: str | None = None,
        description: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | None = None,
        client: openai.AsyncOpenAI | None = None,
        token_meter: TokenMeter | None = None,
        empty_reply_retries: int = 1,
        watcher: ModelCallWatcher | None = None,
        chat_forms: ChatFormMemory | None = None,
    ) -> None:
        super().__init__(name, description=description)
        endpoint = endpoint or ModelEndpoint()
        model = endpoint.model if model is None else model
        problems: list[str] = []
        if not model:
            problems.append("model must be a non-empty model name")
        if temperature is not None and not 0 <= temperature <= 2:
            problems.append(f"temperature must be between 0 and 2 (got {temperature})")
        if max_tokens is not None and max_tokens < 1:
            problems.append(f"max_tokens must be >= 1 (got {max_tokens})")
        if empty_reply_retries < 0:
            problems.append(f"empty_reply_retries must be >= 0 (got {empty_reply_retries})")
        if problems:
            raise UserError(f"OpenAIChatAgent {name!r}: " + "; ".join(problems))
        self.model = model
        self.system_message = system_message
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.stop = list(stop) if stop else None
        self.tools = list(tools) if tools else None
        self.tool_choice = tool_choice
        self.token_meter = token_meter or TokenMeter()
        self.empty_reply_retries = empty_reply_retries
        self.watcher = watcher
        """Told when each model call starts and ends (e.g. to show who is being waited for)."""
        client = client or endpoint.client()
        self.client = client
        self.max_retries = client.max_retries
        # One HTTP attempt per call: retrying is decided here (see the module doc).
        self._single_attempt = client.with_options(max_retries=0)
        if getattr(client, "_strict_response_validation", False):
            # The copy forgets this setting unless it is handed over.
            self._single_attempt = client.with_options(
                max_retries=0, _extra_kwargs={"_strict_response_validation": True}
            )
        self._working_choice: dict[str, ToolChoice | None] = {}
        self.chat_form = endpoint.chat_form
        self.chat_forms = chat_forms if chat_forms is not None else ChatFormMemory()
        """The chat form found for each model (agents on one endpoint share it)."""
        self._unalternated_empties = 0
        self.tools_unsupported: str | None = None
        """Why the endpoint takes no tools, once it said so (requests with tools then fail
        at once)."""

    async def aclose(self) -> None:
        """Close the HTTP connections of this agent's client."""
        await self.client.close()

    @property
    def base_url(self) -> str:
        return str(self.client.base_url)

    @property
    def _where(self) -> str:
        return f"model {self.model!r} at {self.base_url} (agent {self.name!r})"

    def build_request(
        self, messages: Sequence[Message], options: GenerateReplyOptions | None = None
    ) -> dict[str, Any]:
        """The Chat Completions request body this agent would send (without transport)."""
        options = options or GenerateReplyOptions()
        request: dict[str, Any] = {
            "model": self.model,
            "messages": to_chat_messages(
                messages, agent_name=self.name, system_message=self.system_message
            ),
        }
        settings = {
            "temperature": _first(options.temperature, self.temperature),
            "max_tokens": _first(options.max_tokens, self.max_tokens),
            "stop": _first(options.stop_sequences, self.stop),
            "tools": _first(options.tools, self.tools),
        }
        request.update({key: value for key, value in settings.items() if value is not None})
        tool_choice = _first(options.tool_choice, self.tool_choice)
        if tool_choice is not None and request.get("tools"):
            request["tool_choice"] = tool_choice
        if options.extra:
            request.update(options.extra)
        return request

    async def generate_reply(
        self, messages: Sequence[Message], options: GenerateReplyOptions | None = None
    ) -> Message:
        if self.watcher is None:
            return await self._reply(messages, options)
        self.watcher.call_started(self.name, self.model)
        try:
            return await self._reply(messages, options)
        finally:
            self.watcher.call_ended(self.name, self.model)

    async def _reply(
        self, messages: Sequence[Message], options: GenerateReplyOptions | None
    ) -> Message:
        request = self.build_request(messages, options)
        offered = offered_names(request)
        if offered and self.tools_unsupported is not None:
            raise ToolsUnsupportedError(
                f"{self._where} cannot be offered tools: {self.tools_unsupported}"
            )
        notes: list[str] = []
        reply, cut_off = await self._answer(request, offered, notes, None)
        if not cut_off:
            return reply
        # A reply cut off at its length limit is unusable (an unclosed code block, a lost
        # completion signal): ask once more, saying what was wrong.
        limit = request.get("max_tokens")
        where = f"its limit of {limit} tokens" if limit else "the server's length limit"
        notes.append(
            f"{self.name}'s reply was cut off at {where} (finish_reason='length'); "
            "asked again for a shorter one"
        )
        shorter = SHORTER_REPLY.format(limit=f"{limit} tokens" if limit else "the length limit")
        asked = {"role": "user", "content": shorter}
        retry = {**request, "messages": [*request["messages"], asked]}
        reply, cut_off = await self._answer(retry, offered, notes, reply.usage)
        if not cut_off:
            return reply
        raise TruncatedReplyError(
            f"{self._where} wrote past {where} twice (finish_reason='length'); raise the "
            "role's reply cap (the reply_tokens settings) or ask for less",
            usage=reply.usage,
            notes=notes,
        )

    async def _answer(
        self,
        request: dict[str, Any],
        offered: list[str],
        notes: list[str],
        spent: Usage | None,
    ) -> tuple[Message, bool]:
        """The reply to ``request`` (sent in the chat form the endpoint needs, empty replies
        asked again) and whether it was cut off at its length limit."""
        form = self.form_to_send()
        tried: list[str] = []
        empties = 0
        detail = ""
        while True:
            sent = {**request, "messages": in_form(request["messages"], form, agent_name=self.name)}
            unalternated = (
                self.chat_form == "auto"
                and form is ChatForm.OPEN
                and not alternates(sent["messages"])
            )
            attempts = 1 if offered else 1 + self.empty_reply_retries
            switch: ChatForm | None = None
            for attempt in range(1, attempts + 1):
                try:
                    completion = await self._complete(sent, offered, notes)
                except _TurnsRefused as refusal:
                    switch = self._after_refusal(form, refusal, tried, notes)
                    break
                usage = self._usage(completion, request)
                self.token_meter.record(usage)
                spent = add_usage(spent, usage)
                reply = self._to_message(completion, offered, notes, spent)
                if reply is not None:
                    self._unalternated_empties = 0
                    if self.chat_form == "auto" and form is not ChatForm.OPEN:
                        self.chat_forms.remember(self.model, form)
                    cut_off = (
                        completion.choices[0].finish_reason == "length"
                        and isinstance(reply, TextMessage)
                        # reasoning cut short is the caller's to judge (role play gives room)
                        and not is_unfinished_reasoning(reply.content)
                    )
                    return reply.model_copy(update={"usage": spent, "notes": list(notes)}), cut_off
                empties += 1
                detail = _empty_detail(completion)
                if unalternated:
                    self._unalternated_empties += 1
                    if self._unalternated_empties >= 2:
                        # The same non-alternating request came back empty twice: a server
                        # whose template refuses it silently (llama.cpp did).
                        tried.append(f"the {form} form came back empty twice")
                        notes.append(
                            f"{self.name} gave an empty reply ({detail}) again to a request "
                            f"whose roles do not alternate; sent it in the "
                            f"{ChatForm.ALTERNATING} form"
                        )
                        switch = ChatForm.ALTERNATING
                        break
                again = "; asked again" if attempt < attempts else ""
                notes.append(f"{self.name} gave an empty reply ({detail}){again}")
            if switch is None:
                break
            form = switch
        if tried:
            tried.append(f"the {form} form came back empty too")
        what = f"; {'; '.join(tried)}" if tried else ""
        raise EmptyReplyError(
            f"{self._where} returned an empty reply {empties} time(s) ({detail}){what}; "
            "check the prompt and max_tokens",
            usage=spent,
            notes=notes,
        )

    def form_to_send(self) -> ChatForm:
        """The chat form of the next request: the forced one, else the one found for this
        model on this endpoint, else the open form."""
        if self.chat_form != "auto":
            return ChatForm(self.chat_form)
        return self.chat_forms.get(self.model) or ChatForm.OPEN

    def _after_refusal(
        self, form: ChatForm, refusal: _TurnsRefused, tried: list[str], notes: list[str]
    ) -> ChatForm:
        """The form to try after the server refused ``form``'s turn structure (or raise)."""
        tried.append(f"the {form} form was refused ({refusal.detail})")
        following: ChatForm | None = None
        if self.chat_form == "auto" and form is not ChatForm.ALTERNATING_NO_SYSTEM:
            following = (
                ChatForm.ALTERNATING
                if form is ChatForm.OPEN and refusal.objection == "alternation"
                else ChatForm.ALTERNATING_NO_SYSTEM
            )
        if following is None:
            fix = (
                f"; chat_form is set to {self.chat_form!r}: set it to 'auto' to let sandcrew "
                "find the form the server accepts"
                if self.chat_form != "auto"
                else "; the server's chat template accepts none of them"
            )
            raise InfrastructureError(
                f"{self._where} refused the conversation's turn structure: {'; '.join(tried)}{fix}",
                code=ErrorCode.MODEL_REJECTED,
                retryable=False,
            )
        notes.append(
            f"the endpoint refused the {form} form of the conversation ({refusal.detail}); "
            f"sent it in the {following} form"
        )
        return following

    # --- sending ------------------------------------------------------------------------------

    async def _complete(
        self, request: dict[str, Any], offered: list[str], notes: list[str]
    ) -> ChatCompletion:
        """Send ``request``, replacing a ``tool_choice`` form the endpoint rejects."""
        request = dict(request)
        capped = self.token_meter.cap(
            request.get("max_tokens"),
            prompt_tokens=estimate_prompt_tokens(request),
            who=f"agent {self.name!r}",
        )
        if capped is not None:
            request["max_tokens"] = capped
        if not offered:
            try:
                return await self._send(request)
            except openai.BadRequestError as error:
                raise self._status_error(error) from error
        asked = request.get("tool_choice")
        key = choice_key(asked)
        forms = choice_forms(asked, offered)
        if key in self._working_choice:
            remembered = self._working_choice[key]
            forms = [remembered, *(form for form in forms if form != remembered)]
        rejections: list[str] = []
        for form in forms:
            attempt = with_choice(request, form)
            try:
                completion = await self._send(attempt)
            except openai.BadRequestError as error:
                message = server_message(error)
                if NO_TOOLS_WORDS.search(message):
                    self.tools_unsupported = f"HTTP 400: {message}"
                    raise ToolsUnsupportedError(
                        f"{self._where} does not support tools (HTTP 400: {message})"
                    ) from error
                if "tool" not in message.lower() or is_context_overflow(error):
                    raise self._status_error(error) from error
                rejections.append(f"{choice_label(form)} (HTTP 400: {message})")
                continue
            if rejections:
                notes.append(
                    f"the endpoint rejected tool_choice {'; '.join(rejections)}; "
                    f"sent {choice_label(form)} instead"
                )
            self._working_choice[key] = form
            return completion
        self.tools_unsupported = "it rejected every tool_choice form: " + "; ".join(rejections)
        raise ToolsUnsupportedError(
            f"{self._where} cannot be offered tools: {self.tools_unsupported}"
        )

    async def _send(self, request: dict[str, Any]) -> ChatCompletion:
        """One request, retried only where that cannot duplicate work on the server."""
        attempt = 0
        while True:
            try:
                completion = await self._single_attempt.chat.completions.create(
                    **request, extra_headers={AGENT_HEADER: self.name}
                )
            except openai.APITimeoutError as error:
                if never_sent(error) and attempt < self.max_retries:
                    attempt += 1
                    await asyncio.sleep(backoff(attempt))
                    continue
                raise self._slow(request) from error
            except openai.APIConnectionError as error:
                if attempt < self.max_retries:
                    attempt += 1
                    await asyncio.sleep(backoff(attempt))
                    continue
                raise self._down(error, attempt + 1) from error
            except openai.APIStatusError as error:
                objection = refused_turns(server_message(error))
                if objection is not None:
                    # A chat template's refusal: the same request would be refused again.
                    detail = f"HTTP {error.status_code}: {server_message(error)}"
                    raise _TurnsRefused(objection, detail) from error
                if worth_retrying(error) and attempt < self.max_retries:
                    attempt += 1
                    await asyncio.sleep(retry_after(error) or backoff(attempt))
                    continue
                if error.status_code == 400 and isinstance(error, openai.BadRequestError):
                    raise
                raise self._status_error(error, attempt + 1) from error
            except openai.APIResponseValidationError as error:
                raise self._not_openai(
                    f"a response the openai client rejected: {error.message}"
                ) from error
            except asyncio.CancelledError:
                # Abandoned (Ctrl-C, a time budget, a client gone): the connection closes, which
                # stops the server's reply. The prompt was read; what was written of the reply
                # before is unknown and not counted (a timeout, below, counts the whole cap).
                self.token_meter.record(estimated_usage(estimate_prompt_tokens(request), 0))
                raise
            if not isinstance(completion, ChatCompletion):
                # The client hands back the text of a 200 that is not JSON (an HTML proxy page).
                raise self._not_openai(_describe_foreign(completion))
            if not isinstance(getattr(completion, "choices", None), list):
                raise self._not_openai("JSON without a 'choices' list")
            return completion

    def _abandoned_usage(self, request: dict[str, Any]) -> Usage:
        return estimated_usage(estimate_prompt_tokens(request), request.get("max_tokens") or 0)

    def _slow(self, request: dict[str, Any]) -> EndpointTimeoutError:
        usage = self._abandoned_usage(request)
        self.token_meter.record(usage)
        return EndpointTimeoutError(
            f"the model endpoint {self.base_url} is slow: no answer within "
            f"{self.client.timeout} s (agent {self.name!r}, model {self.model!r}). The request "
            "was not sent again, since the server may still be generating it; a local server "
            "answers one request at a time, so raise the request timeout (--request-timeout)",
            usage=usage,
        )

    def _down(self, error: openai.APIConnectionError, attempts: int) -> InfrastructureError:
        if isinstance(error, openai.APITimeoutError):
            what = f"did not accept a connection within {self.client.timeout} s"
        else:
            what = f"could not be reached ({error.__cause__ or error})"
        return InfrastructureError(
            f"the model endpoint {self.base_url} is down: it {what} after {attempts} "
            f"attempt(s) (agent {self.name!r}); check that the server is running and "
            "base_url is right",
            code=ErrorCode.MODEL_UNREACHABLE,
            retryable=True,
        )

    def _not_openai(self, got: str) -> ConfigurationError:
        return ConfigurationError(
            f"{self.base_url} did not answer like an OpenAI-compatible endpoint (got {got}); "
            f"check base_url (it usually ends in /v1); agent {self.name!r}, model {self.model!r}"
        )

    # --- reading ------------------------------------------------------------------------------

    def _usage(self, completion: ChatCompletion, request: dict[str, Any]) -> Usage:
        reported = completion.usage
        if reported is not None and isinstance(reported.total_tokens, int):
            return Usage(
                prompt_tokens=reported.prompt_tokens or 0,
                completion_tokens=reported.completion_tokens or 0,
                total_tokens=reported.total_tokens,
            )
        written = ""
        for choice in completion.choices or []:
            message: Any = getattr(choice, "message", None)
            written += str(getattr(message, "content", None) or "")
            for call in getattr(message, "tool_calls", None) or []:
                function: Any = getattr(call, "function", None)
                written += str(getattr(function, "name", "")) + str(
                    getattr(function, "arguments", "")
                )
        return estimated_usage(estimate_prompt_tokens(request), estimate_tokens(written))

    def _to_message(
        self,
        completion: ChatCompletion,
        offered: list[str],
        notes: list[str],
        usage: Usage | None,
    ) -> Message | None:
        """The reply as a message; ``None`` when it is empty."""
        where = self._where
        if not completion.choices:
            raise ModelReplyError(f"{where} returned no choices", usage=usage, notes=notes)
        choice = completion.choices[0]
        reply = choice.message
        if reply.refusal:
            raise ModelReplyError(
                f"{where} refused to answer: {reply.refusal!r}", usage=usage, notes=notes
            )
        if choice.finish_reason == "content_filter":
            raise ModelReplyError(
                f"{where} stopped: its content filter blocked the reply", usage=usage, notes=notes
            )
        tool_calls: list[ToolCall] = []
        for index, call in enumerate(reply.tool_calls or []):
            # Lenient: servers that omit the call "type" still carry a function.
            function: Any = getattr(call, "function", None)
            if function is None or not isinstance(function.name, str):
                continue
            arguments: Any = function.arguments
            if arguments is None:
                arguments = "{}"
            elif not isinstance(arguments, str):
                notes.append(
                    f"the server sent the arguments of {function.name} as a JSON value, "
                    "not as a JSON string"
                )
                arguments = json.dumps(arguments)
            tool_calls.append(
                ToolCall(id=call.id or f"call_{index}", name=function.name, arguments=arguments)
            )
        content = reply.content if isinstance(reply.content, str) else None
        if not tool_calls and offered and content:
            tool_calls = calls_from_text(content, offered)
            if tool_calls:
                names = ", ".join(call.name for call in tool_calls)
                notes.append(
                    f"read the call to {names} from the reply's text (the server did not "
                    "return it as a tool call)"
                )
                content = None
        if tool_calls:
            tool_calls, dropped = without_repeats(tool_calls)
            notes.extend(dropped)
            return ToolCallMessage(tool_calls=tool_calls, text=content or None, sender=self.name)
        if not content or not content.strip():
            return None
        return TextMessage(content=content, sender=self.name)

    def _status_error(self, error: openai.APIStatusError, attempts: int = 1) -> Exception:
        status = error.status_code
        detail = f"HTTP {status}: {error.message}"
        where = f"the model endpoint {self.base_url} (agent {self.name!r}, model {self.model!r})"
        if status in (401, 403):
            return ConfigurationError(
                f"{where} rejected the API key ({detail}); set api_key= or OPENAI_API_KEY"
            )
        if status == 404:
            return ConfigurationError(
                f"{where} does not know this model or path ({detail}); check model and base_url"
            )
        if is_context_overflow(error):
            return InfrastructureError(
                f"{where} answered that the request exceeds the model's context ({detail}); "
                "lower context_tokens or use a model with a larger context",
                code=ErrorCode.MODEL_CONTEXT_EXCEEDED,
                retryable=False,
            )
        if status == 429 or status >= 500:
            return InfrastructureError(
                f"{where} kept failing after {attempts} attempt(s): {detail}",
                code=ErrorCode.MODEL_ERROR,
                retryable=True,
            )
        return InfrastructureError(
            f"{where} rejected the request: {detail}",
            code=ErrorCode.MODEL_REJECTED,
            retryable=False,
        )


def _empty_detail(completion: ChatCompletion) -> str:
    choice = completion.choices[0]
    return f"content={choice.message.content!r}, finish_reason={choice.finish_reason!r}"


def _describe_foreign(answer: object) -> str:
    if isinstance(answer, str):
        start = " ".join(answer.split())[:80]
        return f"a non-JSON body starting {start!r}" if start else "an empty body"
    return f"a {type(answer).__name__} instead of a chat completion"


def _first(override: Any, default: Any) -> Any:
    return default if override is None else override
