"""Multi-agent chat with AutoGen.NET's semantics: messages, middleware, a model agent,
function calls, human input, and group chats with round-robin, workflow and role-play
speaker selection — with typed termination, budgets and stop reasons.

Middleware order: ``agent.use(a).use(b)`` runs ``b`` first (outermost), then ``a``, then the
agent — the last registered middleware runs first, as in AutoGen.NET.
"""

import typing

# The one list of this package's exports: type checkers read these imports; at run
# time each name loads on first use (see sandcrew.core._lazy), and __all__ lists them.
if typing.TYPE_CHECKING:
    from ._agent import (
        Agent as Agent,
        BaseAgent as BaseAgent,
        DefaultReplyAgent as DefaultReplyAgent,
        GenerateReplyOptions as GenerateReplyOptions,
        Middleware as Middleware,
        MiddlewareAgent as MiddlewareAgent,
        ToolChoice as ToolChoice,
        use as use,
    )
    from ._endpoint import (
        DEFAULT_MODEL as DEFAULT_MODEL,
        ModelEndpoint as ModelEndpoint,
    )
    from ._function_call import (
        FunctionCallAttempt as FunctionCallAttempt,
        FunctionCallMiddleware as FunctionCallMiddleware,
        FunctionCallRequiredError as FunctionCallRequiredError,
    )
    from ._graph import (
        Condition as Condition,
        Graph as Graph,
        Transition as Transition,
    )
    from ._group_chat import (
        ChatResult as ChatResult,
        ChatStream as ChatStream,
        GroupChat as GroupChat,
    )
    from ._human import (
        HUMAN_INPUT_PROMPT as HUMAN_INPUT_PROMPT,
        AssistantAgent as AssistantAgent,
        HumanInputMiddleware as HumanInputMiddleware,
        HumanInputMode as HumanInputMode,
        UserProxyAgent as UserProxyAgent,
    )
    from ._messages import (
        CLEAR_MESSAGES as CLEAR_MESSAGES,
        TERMINATE as TERMINATE,
        AggregateMessage as AggregateMessage,
        Message as Message,
        TextMessage as TextMessage,
        ToolCall as ToolCall,
        ToolCallMessage as ToolCallMessage,
        ToolCallResult as ToolCallResult,
        ToolResultMessage as ToolResultMessage,
        Usage as Usage,
        is_clear as is_clear,
        terminate_message as terminate_message,
    )
    from ._model_errors import (
        EmptyReplyError as EmptyReplyError,
        EndpointTimeoutError as EndpointTimeoutError,
        ModelReplyError as ModelReplyError,
        ToolsUnsupportedError as ToolsUnsupportedError,
        spent_usage as spent_usage,
    )
    from ._openai_agent import (
        AGENT_HEADER as AGENT_HEADER,
        ModelCallWatcher as ModelCallWatcher,
        OpenAIChatAgent as OpenAIChatAgent,
    )
    from ._orchestrators import (
        AmbiguousWorkflowError as AmbiguousWorkflowError,
        OrchestrationContext as OrchestrationContext,
        Orchestrator as Orchestrator,
        RolePlayOrchestrator as RolePlayOrchestrator,
        RoundRobinOrchestrator as RoundRobinOrchestrator,
        WorkflowOrchestrator as WorkflowOrchestrator,
    )
    from ._print import (
        PrintMessageMiddleware as PrintMessageMiddleware,
        render_message as render_message,
    )
    from ._reasoning import (
        strip_reasoning as strip_reasoning,
    )
    from ._stop_policy import (
        COMPLETE_SIGNAL as COMPLETE_SIGNAL,
        ChatState as ChatState,
        FinalAnswer as FinalAnswer,
        Stop as Stop,
        StopPolicy as StopPolicy,
        StopReason as StopReason,
        StopRule as StopRule,
        UnsignalledCompletion as UnsignalledCompletion,
        final_answer as final_answer,
        is_solved as is_solved,
        is_terminate as is_terminate,
        read_completion as read_completion,
    )
    from ._tokens import (
        CHARS_PER_TOKEN as CHARS_PER_TOKEN,
        TokenBudgetExhaustedError as TokenBudgetExhaustedError,
        TokenMeter as TokenMeter,
        estimate_tokens as estimate_tokens,
    )
    from ._trim import (
        TrimContextMiddleware as TrimContextMiddleware,
    )
    from ._two_agent import (
        GroupChatManager as GroupChatManager,
        initiate_chat as initiate_chat,
        send as send,
    )
else:
    from ..core import lazy_exports as _lazy_exports

    __getattr__, __dir__ = _lazy_exports(__name__)
