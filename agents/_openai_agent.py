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
* Without ``usage`` in the answer, tokens are estimated (``Usage.estimated``); a shared
  :class:`TokenMeter` caps every request's ``max_tokens`` at what is left of the budget and
  also counts replies that ended in an error and abandoned requests.

Each such step is described in the reply's ``notes`` (kept in the transcript).

Message conversion: the agent's own messages become ``assistant`` messages (with
``tool_calls`` and ``tool`` results for its function calls); other agents' messages become
``user`` messages carrying the sender as ``name``; ``system`` text messages stay ``system``.
The agent's own ``system_message`` goes first only when the messages bring no system message
of their own (as AutoGen.NET does), so a caller such as role-play speaker selection can
replace it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from typing import Any, Protocol

import openai
from openai.types.chat import ChatCompletion

from ..core import (
    ConfigurationError,
    ErrorCode,
    InfrastructureError,
    ModelBehaviorError,
    UserError,
)
from ._agent import BaseAgent, GenerateReplyOptions, ToolChoice
from ._endpoint import ModelEndpoint
from ._messages import (
    AggregateMessage,
    Message,
    TextMessage,
    ToolCall,
    ToolCallMessage,
    ToolResultMessage,
    Usage,
    add_usage,
)
from ._tokens import TokenMeter, estimate_prompt_tokens, estimate_tokens, estimated_usage
from ._tool_text import calls_from_text, without_repeats

AGENT_HEADER = "X-Sandcrew-Agent"
"""Every request names the calling agent in this header (scripted test servers match on it)."""

_NAME_PATTERN = re.compile(r"[^a-zA-Z0-9_-]")
_NO_TOOLS = re.compile(
    r"does not support tools|tools? (?:use |calling )?(?:is |are )?not supported|"
    r"does not support (?:function|tool) call",
    re.IGNORECASE,
)
_MAX_BACKOFF = 8.0
_MAX_RETRY_AFTER = 30.0


class ModelCallWatcher(Protocol):
    """Told when an agent starts waiting for its model and when the wait ends.

    ``call_ended`` follows every ``call_started``, whether the call answered, failed or was
    cancelled; retries and empty replies asked again belong to the one call.
    """

    def call_started(self, agent: str, model: str) -> None: ...

    def call_ended(self, agent: str, model: str) -> None: ...


class ModelReplyError(ModelBehaviorError):
    """A reply the product cannot use; ``usage`` is what it cost, ``notes`` what was tried."""

    def __init__(
        self, message: str, *, usage: Usage | None = None, notes: Sequence[str] = ()
    ) -> None:
        super().__init__(message)
        self.usage = usage
        self.notes = list(notes)


class EmptyReplyError(ModelReplyError):
    """The model answered with no text and no call."""


class ToolsUnsupportedError(ModelReplyError):
    """The endpoint accepts no request that offers tools (for this model)."""


class EndpointTimeoutError(InfrastructureError):
    """The endpoint had the request but did not answer in time; it was not sent again.
    ``usage`` estimates what the abandoned request cost (the prompt and ``max_tokens``)."""

    def __init__(self, message: str, *, usage: Usage) -> None:
        super().__init__(message, code=ErrorCode.MODEL_UNREACHABLE, retryable=True)
        self.usage = usage


def spent_usage(error: BaseException) -> Usage | None:
    """The tokens a failed model request cost, when the error knows them."""
    usage = getattr(error, "usage", None)
    return usage if isinstance(usage, Usage) else None


def _participant_name(sender: str) -> str:
    # The Chat Completions `name` field only allows [a-zA-Z0-9_-]{1,64}.
    return _NAME_PATTERN.sub("_", sender)[:64]


def to_chat_messages(
    messages: Sequence[Message], *, agent_name: str, system_message: str | None = None
) -> list[dict[str, Any]]:
    """Our messages in the Chat Completions format, as seen by the agent ``agent_name``.

    ``system_message`` is put first only when ``messages`` hold no system message.
    """
    converted: list[dict[str, Any]] = []
    has_system = any(isinstance(m, TextMessage) and m.role == "system" for m in messages)
    if system_message and not has_system:
        converted.append({"role": "system", "content": system_message})
    for message in messages:
        own = message.sender == agent_name
        if isinstance(message, TextMessage):
            if message.role == "system":
                converted.append({"role": "system", "content": message.content})
            elif own:
                converted.append({"role": "assistant", "content": message.content})
            else:
                converted.append(_user_message(message.content, message.sender))
        elif isinstance(message, ToolCallMessage | AggregateMessage) and own:
            converted.append(
                {
                    "role": "assistant",
                    "content": message.text,
                    "tool_calls": [_tool_call_param(call) for call in message.tool_calls],
                }
            )
            if isinstance(message, AggregateMessage):
                converted.extend(
                    {"role": "tool", "tool_call_id": result.id, "content": result.content}
                    for result in message.results
                )
        elif isinstance(message, ToolResultMessage) and own:
            converted.append({"role": "assistant", "content": message.content})
        else:
            converted.append(_user_message(_as_text(message), message.sender))
    return converted


def _user_message(content: str, sender: str | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "user", "content": content}
    if sender:
        message["name"] = _participant_name(sender)
    return message


def _tool_call_param(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def _as_text(message: Message) -> str:
    """How another agent's function calls read to this agent (it cannot see their tools)."""
    if isinstance(message, ToolCallMessage):
        calls = ", ".join(f"{call.name}({call.arguments})" for call in message.tool_calls)
        return "\n".join(part for part in (message.text, f"Function calls: {calls}") if part)
    return message.content


class OpenAIChatAgent(BaseAgent):
    """A chat-model agent on ``endpoint`` (its ``model`` unless ``model`` is given).

    ``client`` may be injected (agents of one crew share one); otherwise the endpoint builds
    it. Without an endpoint the client falls back to the ``OPENAI_*`` environment variables.
    The client's ``max_retries`` is used, but the agent does the retrying itself (see the
    module doc). ``token_meter`` is shared by the agents that spend one token budget.
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
        offered = _offered_names(request)
        if offered and self.tools_unsupported is not None:
            raise ToolsUnsupportedError(
                f"{self._where} cannot be offered tools: {self.tools_unsupported}"
            )
        notes: list[str] = []
        spent: Usage | None = None
        attempts = 1 if offered else 1 + self.empty_reply_retries
        detail = ""
        for attempt in range(1, attempts + 1):
            completion = await self._complete(request, offered, notes)
            usage = self._usage(completion, request)
            self.token_meter.record(usage)
            spent = add_usage(spent, usage)
            reply = self._to_message(completion, offered, notes, spent)
            if reply is not None:
                return reply.model_copy(update={"usage": spent, "notes": notes})
            choice = completion.choices[0]
            detail = f"content={choice.message.content!r}, finish_reason={choice.finish_reason!r}"
            again = "; asked again" if attempt < attempts else ""
            notes.append(f"{self.name} gave an empty reply ({detail}){again}")
        raise EmptyReplyError(
            f"{self._where} returned an empty reply {attempts} time(s) ({detail}); "
            "check the prompt and max_tokens",
            usage=spent,
            notes=notes,
        )

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
        key = _choice_key(asked)
        forms = _choice_forms(asked, offered)
        if key in self._working_choice:
            remembered = self._working_choice[key]
            forms = [remembered, *(form for form in forms if form != remembered)]
        rejections: list[str] = []
        for form in forms:
            attempt = _with_choice(request, form)
            try:
                completion = await self._send(attempt)
            except openai.BadRequestError as error:
                message = _server_message(error)
                if _NO_TOOLS.search(message):
                    self.tools_unsupported = f"HTTP 400: {message}"
                    raise ToolsUnsupportedError(
                        f"{self._where} does not support tools (HTTP 400: {message})"
                    ) from error
                if "tool" not in message.lower() or _is_context_overflow(error):
                    raise self._status_error(error) from error
                rejections.append(f"{_choice_label(form)} (HTTP 400: {message})")
                continue
            if rejections:
                notes.append(
                    f"the endpoint rejected tool_choice {'; '.join(rejections)}; "
                    f"sent {_choice_label(form)} instead"
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
                if _never_sent(error) and attempt < self.max_retries:
                    attempt += 1
                    await asyncio.sleep(_backoff(attempt))
                    continue
                raise self._slow(request) from error
            except openai.APIConnectionError as error:
                if attempt < self.max_retries:
                    attempt += 1
                    await asyncio.sleep(_backoff(attempt))
                    continue
                raise self._down(error, attempt + 1) from error
            except openai.APIStatusError as error:
                if _worth_retrying(error) and attempt < self.max_retries:
                    attempt += 1
                    await asyncio.sleep(_retry_after(error) or _backoff(attempt))
                    continue
                if error.status_code == 400 and isinstance(error, openai.BadRequestError):
                    raise
                raise self._status_error(error, attempt + 1) from error
            except openai.APIResponseValidationError as error:
                raise self._not_openai(
                    f"a response the openai client rejected: {error.message}"
                ) from error
            except asyncio.CancelledError:
                # Abandoned (a time budget ran out): the server may still be generating.
                self.token_meter.record(self._abandoned_usage(request))
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
        if _is_context_overflow(error):
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


def _offered_names(request: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for tool in request.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


def _choice_key(choice: Any) -> str:
    if isinstance(choice, dict):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        return f"named:{name}"
    return str(choice)


def _choice_label(choice: ToolChoice | None) -> str:
    if choice is None:
        return "(none sent)"
    if isinstance(choice, dict):
        return f"named {_choice_key(choice).removeprefix('named:')!r}"
    return repr(choice)


def _choice_forms(asked: Any, offered: list[str]) -> list[ToolChoice | None]:
    """``asked`` first, then the other forms that still offer the same tools (``None``:
    send no ``tool_choice`` and let the server decide)."""
    named: list[ToolChoice | None] = (
        [{"type": "function", "function": {"name": offered[0]}}] if len(offered) == 1 else []
    )
    forced = isinstance(asked, dict) or asked == "required"
    others: list[ToolChoice | None] = (
        [*named, "required", "auto", None] if forced else ["auto", *named, "required", None]
    )
    forms: list[ToolChoice | None] = [asked]
    forms.extend(form for form in others if form != asked)
    return forms


def _with_choice(request: dict[str, Any], choice: ToolChoice | None) -> dict[str, Any]:
    updated = {key: value for key, value in request.items() if key != "tool_choice"}
    if choice is not None:
        updated["tool_choice"] = choice
    return updated


def _never_sent(error: openai.APITimeoutError) -> bool:
    """A connect (or pool) timeout: the server never had the request."""
    # By name: the HTTP library under the openai client differs between its versions.
    return type(error.__cause__).__name__ in ("ConnectTimeout", "PoolTimeout")


def _server_message(error: openai.APIStatusError) -> str:
    """What the server said, without the client's "Error code: 400 - " prefix."""
    body: Any = error.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return error.message


def _worth_retrying(error: openai.APIStatusError) -> bool:
    advice = error.response.headers.get("x-should-retry")
    if advice in ("true", "false"):
        return advice == "true"
    return error.status_code in (408, 409, 429) or error.status_code >= 500


def _backoff(attempt: int) -> float:
    return float(min(_MAX_BACKOFF, 0.5 * 2 ** (attempt - 1)))


def _retry_after(error: openai.APIStatusError) -> float | None:
    headers = error.response.headers
    for header, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(header)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue
        if 0 <= seconds <= _MAX_RETRY_AFTER:
            return seconds
    return None


_CONTEXT_OVERFLOW_WORDS = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|exceeds? the (available )?context"
    r"|context (window|size) (is )?exceeded|too many tokens",
    re.IGNORECASE,
)


def _is_context_overflow(error: openai.APIStatusError) -> bool:
    """OpenAI says ``context_length_exceeded``; vLLM, llama.cpp and others say it in words."""
    return error.code == "context_length_exceeded" or bool(
        _CONTEXT_OVERFLOW_WORDS.search(error.message)
    )


def _describe_foreign(answer: object) -> str:
    if isinstance(answer, str):
        start = " ".join(answer.split())[:80]
        return f"a non-JSON body starting {start!r}" if start else "an empty body"
    return f"a {type(answer).__name__} instead of a chat completion"


def _first(override: Any, default: Any) -> Any:
    return default if override is None else override
