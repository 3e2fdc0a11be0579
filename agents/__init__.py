"""Multi-agent chat with AutoGen.NET's semantics: messages, middleware, a model agent,
function calls, human input, and group chats with round-robin, workflow and role-play
speaker selection — with typed termination, budgets and stop reasons.

Middleware order: ``agent.use(a).use(b)`` runs ``b`` first (outermost), then ``a``, then the
agent — the last registered middleware runs first, as in AutoGen.NET.
"""

import typing

# This package's exports: type checkers read these imports; at run time each name loads
# on first use from the module the mapping below names (see sandcrew.core._lazy), and
# __all__ lists them. The two lists name the same names (tests/test_public_surface.py).
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
    from ._chat_format import (
        ChatForm as ChatForm,
        ChatFormMemory as ChatFormMemory,
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
        TruncatedReplyError as TruncatedReplyError,
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

    __getattr__, __dir__ = _lazy_exports(
        __name__,
        {
            "Agent": "._agent",
            "BaseAgent": "._agent",
            "DefaultReplyAgent": "._agent",
            "GenerateReplyOptions": "._agent",
            "Middleware": "._agent",
            "MiddlewareAgent": "._agent",
            "ToolChoice": "._agent",
            "use": "._agent",
            "ChatForm": "._chat_format",
            "ChatFormMemory": "._chat_format",
            "DEFAULT_MODEL": "._endpoint",
            "ModelEndpoint": "._endpoint",
            "FunctionCallAttempt": "._function_call",
            "FunctionCallMiddleware": "._function_call",
            "FunctionCallRequiredError": "._function_call",
            "Condition": "._graph",
            "Graph": "._graph",
            "Transition": "._graph",
            "ChatResult": "._group_chat",
            "ChatStream": "._group_chat",
            "GroupChat": "._group_chat",
            "HUMAN_INPUT_PROMPT": "._human",
            "AssistantAgent": "._human",
            "HumanInputMiddleware": "._human",
            "HumanInputMode": "._human",
            "UserProxyAgent": "._human",
            "CLEAR_MESSAGES": "._messages",
            "TERMINATE": "._messages",
            "AggregateMessage": "._messages",
            "Message": "._messages",
            "TextMessage": "._messages",
            "ToolCall": "._messages",
            "ToolCallMessage": "._messages",
            "ToolCallResult": "._messages",
            "ToolResultMessage": "._messages",
            "Usage": "._messages",
            "is_clear": "._messages",
            "terminate_message": "._messages",
            "EmptyReplyError": "._model_errors",
            "EndpointTimeoutError": "._model_errors",
            "ModelReplyError": "._model_errors",
            "ToolsUnsupportedError": "._model_errors",
            "TruncatedReplyError": "._model_errors",
            "spent_usage": "._model_errors",
            "AGENT_HEADER": "._openai_agent",
            "ModelCallWatcher": "._openai_agent",
            "OpenAIChatAgent": "._openai_agent",
            "AmbiguousWorkflowError": "._orchestrators",
            "OrchestrationContext": "._orchestrators",
            "Orchestrator": "._orchestrators",
            "RolePlayOrchestrator": "._orchestrators",
            "RoundRobinOrchestrator": "._orchestrators",
            "WorkflowOrchestrator": "._orchestrators",
            "PrintMessageMiddleware": "._print",
            "render_message": "._print",
            "strip_reasoning": "._reasoning",
            "COMPLETE_SIGNAL": "._stop_policy",
            "ChatState": "._stop_policy",
            "FinalAnswer": "._stop_policy",
            "Stop": "._stop_policy",
            "StopPolicy": "._stop_policy",
            "StopReason": "._stop_policy",
            "StopRule": "._stop_policy",
            "UnsignalledCompletion": "._stop_policy",
            "final_answer": "._stop_policy",
            "is_solved": "._stop_policy",
            "is_terminate": "._stop_policy",
            "read_completion": "._stop_policy",
            "CHARS_PER_TOKEN": "._tokens",
            "TokenBudgetExhaustedError": "._tokens",
            "TokenMeter": "._tokens",
            "estimate_tokens": "._tokens",
            "TrimContextMiddleware": "._trim",
            "GroupChatManager": "._two_agent",
            "initiate_chat": "._two_agent",
            "send": "._two_agent",
        },
    )
