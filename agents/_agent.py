"""The agent protocol, reply options, the default-reply agent and middleware.

Middleware order (the same as AutoGen.NET's ``MiddlewareAgent``, LIFO): every ``use`` wraps
the agent built so far, so **the middleware registered last runs first** (it is the outermost
layer and sees the messages first and the reply last)::

    agent = inner.use(a).use(b)
    # generate_reply runs:  b -> a -> inner  (and the reply travels inner -> a -> b)

``use`` never changes the agent it is called on: it returns a new agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from ..core import UserError
from ._messages import Message, TextMessage

ToolChoice = Literal["auto", "none", "required"] | dict[str, Any]


class GenerateReplyOptions(BaseModel):
    """Per-call settings an agent may honour (a model agent maps them onto its request).

    ``None`` means "use the agent's own default".
    """

    model_config = ConfigDict(frozen=True)

    temperature: float | None = None
    max_tokens: int | None = None
    stop_sequences: list[str] | None = None
    tools: list[dict[str, Any]] | None = None
    """Tools in the Chat Completions format (``{"type": "function", "function": {...}}``)."""
    tool_choice: ToolChoice | None = None
    extra: dict[str, Any] | None = None
    """Extra request fields passed through to the model endpoint."""


@runtime_checkable
class Agent(Protocol):
    """Anything that can take part in a chat: a name and a way to reply to a history."""

    @property
    def name(self) -> str: ...

    async def generate_reply(
        self, messages: Sequence[Message], options: GenerateReplyOptions | None = None
    ) -> Message: ...


Middleware = Callable[[Sequence[Message], GenerateReplyOptions, Agent], Awaitable[Message]]
"""An async callable ``(messages, options, inner_agent) -> reply``.

It may call ``inner_agent.generate_reply`` (any number of times) or answer by itself.
Classes work too: give them ``async def __call__(self, messages, options, agent)`` and an
optional ``name`` attribute.
"""


def middleware_name(middleware: Middleware) -> str:
    """A readable name for a middleware (its ``name`` attribute, function or class name)."""
    name = getattr(middleware, "name", None)
    if isinstance(name, str) and name:
        return name
    function_name = getattr(middleware, "__name__", None)
    if isinstance(function_name, str):
        return function_name
    return type(middleware).__name__


def agent_description(agent: Agent) -> str | None:
    """The optional ``description`` of an agent (used by role-play speaker selection)."""
    description = getattr(agent, "description", None)
    return description if isinstance(description, str) and description.strip() else None


class BaseAgent:
    """Convenience base: a name, an optional description and ``use``/``register_middleware``."""

    def __init__(self, name: str, *, description: str | None = None) -> None:
        if not isinstance(name, str) or not name.strip():
            raise UserError(f"an agent needs a non-empty name (got {name!r})")
        self._name = name
        self._description = description

    @property
    def name(self) -> str:
        return self._name

    @property
    def description(self) -> str | None:
        return self._description

    async def generate_reply(
        self, messages: Sequence[Message], options: GenerateReplyOptions | None = None
    ) -> Message:
        raise NotImplementedError

    def use(self, *middlewares: Middleware) -> MiddlewareAgent:
        """A new agent with ``middlewares`` added; the last one added runs first."""
        return use(self, *middlewares)

    def register_middleware(self, middleware: Middleware) -> MiddlewareAgent:
        """AutoGen's name for :meth:`use`."""
        return use(self, middleware)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r})"


class DefaultReplyAgent(BaseAgent):
    """Always answers with the same text (useful under middleware that does the real work)."""

    def __init__(self, name: str, default_reply: str, *, description: str | None = None) -> None:
        super().__init__(name, description=description)
        self.default_reply = default_reply

    async def generate_reply(
        self, messages: Sequence[Message], options: GenerateReplyOptions | None = None
    ) -> Message:
        return TextMessage(content=self.default_reply, sender=self.name)


class _Layer:
    """One middleware bound to the agent it wraps (internal link of the chain)."""

    def __init__(self, middleware: Middleware, inner: Agent) -> None:
        self._middleware = middleware
        self._inner = inner

    @property
    def name(self) -> str:
        return self._inner.name

    async def generate_reply(
        self, messages: Sequence[Message], options: GenerateReplyOptions | None = None
    ) -> Message:
        return await self._middleware(
            list(messages), options or GenerateReplyOptions(), self._inner
        )


class MiddlewareAgent(BaseAgent):
    """An agent wrapped in middleware; ``middlewares`` lists them in registration order."""

    def __init__(self, inner: Agent, middlewares: Sequence[Middleware] = ()) -> None:
        super().__init__(inner.name, description=agent_description(inner))
        self.inner = inner
        self.middlewares: tuple[Middleware, ...] = tuple(middlewares)
        chain: Agent = inner
        for middleware in self.middlewares:
            chain = _Layer(middleware, chain)
        self._chain = chain

    async def generate_reply(
        self, messages: Sequence[Message], options: GenerateReplyOptions | None = None
    ) -> Message:
        return await self._chain.generate_reply(messages, options)

    def __repr__(self) -> str:
        names = [middleware_name(m) for m in reversed(self.middlewares)]
        return f"MiddlewareAgent({' -> '.join([*names, repr(self.inner)])})"


def use(agent: Agent, *middlewares: Middleware) -> MiddlewareAgent:
    """Wrap any agent in middleware (the last one given runs first); ``agent`` is untouched."""
    if not middlewares:
        raise UserError("use() needs at least one middleware")
    if isinstance(agent, MiddlewareAgent):
        return MiddlewareAgent(agent.inner, [*agent.middlewares, *middlewares])
    return MiddlewareAgent(agent, middlewares)
