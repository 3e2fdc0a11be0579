"""An agent backed by any OpenAI-compatible Chat Completions endpoint.

Works with OpenAI, Azure, Ollama, vLLM, llama.cpp, LM Studio — anything that speaks
``/v1/chat/completions`` — through ``base_url``. Retries with exponential backoff on 429, 5xx,
connection errors and timeouts are done by the ``openai`` client itself, as the agent's
:class:`ModelEndpoint` sets them (``retries``, ``timeout``).

Message conversion: the agent's own messages become ``assistant`` messages (with
``tool_calls`` and ``tool`` results for its function calls); other agents' messages become
``user`` messages carrying the sender as ``name``; ``system`` text messages stay ``system``.
The agent's own ``system_message`` goes first only when the messages bring no system message
of their own (as AutoGen.NET does), so a caller such as role-play speaker selection can
replace it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

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
)

AGENT_HEADER = "X-Sandcrew-Agent"
"""Every request names the calling agent in this header (scripted test servers match on it)."""

_NAME_PATTERN = re.compile(r"[^a-zA-Z0-9_-]")


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
        if problems:
            raise UserError(f"OpenAIChatAgent {name!r}: " + "; ".join(problems))
        self.model = model
        self.system_message = system_message
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.stop = list(stop) if stop else None
        self.tools = list(tools) if tools else None
        self.tool_choice = tool_choice
        self.client = client or endpoint.client()

    async def aclose(self) -> None:
        """Close the HTTP connections of this agent's client."""
        await self.client.close()

    @property
    def base_url(self) -> str:
        return str(self.client.base_url)

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
        request = self.build_request(messages, options)
        try:
            completion = await self.client.chat.completions.create(
                **request, extra_headers={AGENT_HEADER: self.name}
            )
        except openai.APIConnectionError as error:
            raise self._unreachable(error) from error
        except openai.APIStatusError as error:
            raise self._status_error(error) from error
        except openai.APIResponseValidationError as error:
            raise self._not_openai(
                f"a response the openai client rejected: {error.message}"
            ) from error
        if not isinstance(completion, ChatCompletion):
            # The client hands back the text of a 200 that is not JSON (an HTML proxy page).
            raise self._not_openai(_describe_foreign(completion))
        if not isinstance(getattr(completion, "choices", None), list):
            raise self._not_openai("JSON without a 'choices' list")
        return self._to_message(completion)

    def _not_openai(self, got: str) -> ConfigurationError:
        return ConfigurationError(
            f"{self.base_url} did not answer like an OpenAI-compatible endpoint (got {got}); "
            f"check base_url (it usually ends in /v1); agent {self.name!r}, model {self.model!r}"
        )

    def _to_message(self, completion: ChatCompletion) -> Message:
        usage = None
        if completion.usage is not None:
            usage = Usage(
                prompt_tokens=completion.usage.prompt_tokens,
                completion_tokens=completion.usage.completion_tokens,
                total_tokens=completion.usage.total_tokens,
            )
        where = f"model {self.model!r} at {self.base_url} (agent {self.name!r})"
        if not completion.choices:
            raise ModelBehaviorError(f"{where} returned no choices")
        choice = completion.choices[0]
        reply = choice.message
        if reply.refusal:
            raise ModelBehaviorError(f"{where} refused to answer: {reply.refusal!r}")
        if choice.finish_reason == "content_filter":
            raise ModelBehaviorError(f"{where} stopped: its content filter blocked the reply")
        tool_calls: list[ToolCall] = []
        for index, call in enumerate(reply.tool_calls or []):
            # Lenient: servers that omit the call "type" still carry a function.
            function: Any = getattr(call, "function", None)
            if function is not None:
                tool_calls.append(
                    ToolCall(
                        id=call.id or f"call_{index}",
                        name=function.name,
                        arguments=function.arguments or "{}",
                    )
                )
        if tool_calls:
            return ToolCallMessage(
                tool_calls=tool_calls, text=reply.content or None, sender=self.name, usage=usage
            )
        if not reply.content or not reply.content.strip():
            raise ModelBehaviorError(
                f"{where} returned an empty reply (content={reply.content!r}, "
                f"finish_reason={choice.finish_reason!r}); check the prompt and max_tokens"
            )
        return TextMessage(content=reply.content, sender=self.name, usage=usage)

    def _unreachable(self, error: openai.APIConnectionError) -> InfrastructureError:
        retries = self.client.max_retries
        if isinstance(error, openai.APITimeoutError):
            what = f"did not answer within {self.client.timeout} s"
        else:
            what = f"could not be reached ({error.__cause__ or error})"
        return InfrastructureError(
            f"the model endpoint {self.base_url} {what} after {retries + 1} attempt(s) "
            f"(agent {self.name!r}); check that the server is running and base_url is right",
            code=ErrorCode.MODEL_UNREACHABLE,
            retryable=True,
        )

    def _status_error(self, error: openai.APIStatusError) -> Exception:
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
                f"{where} kept failing after {self.client.max_retries + 1} attempt(s): {detail}",
                code=ErrorCode.MODEL_ERROR,
                retryable=True,
            )
        return InfrastructureError(
            f"{where} rejected the request: {detail}",
            code=ErrorCode.MODEL_REJECTED,
            retryable=False,
        )


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
