"""Multi-agent chat with AutoGen.NET's semantics: messages, middleware, a model agent,
function calls, human input, and group chats with round-robin, workflow and role-play
speaker selection — with typed termination, budgets and stop reasons.

Middleware order: ``agent.use(a).use(b)`` runs ``b`` first (outermost), then ``a``, then the
agent — the last registered middleware runs first, as in AutoGen.NET.
"""

from ..core import trim_middle as trim_text
from ._agent import (
    Agent,
    BaseAgent,
    DefaultReplyAgent,
    GenerateReplyOptions,
    Middleware,
    MiddlewareAgent,
    ToolChoice,
    use,
)
from ._endpoint import DEFAULT_MODEL, ModelEndpoint
from ._function_call import (
    FunctionCallAttempt,
    FunctionCallMiddleware,
    FunctionCallRequiredError,
)
from ._graph import Condition, Graph, Transition
from ._group_chat import ChatResult, ChatStream, GroupChat
from ._human import (
    HUMAN_INPUT_PROMPT,
    AssistantAgent,
    HumanInputMiddleware,
    HumanInputMode,
    UserProxyAgent,
)
from ._messages import (
    CLEAR_MESSAGES,
    TERMINATE,
    AggregateMessage,
    Message,
    TextMessage,
    ToolCall,
    ToolCallMessage,
    ToolCallResult,
    ToolResultMessage,
    Usage,
    is_clear,
    terminate_message,
)
from ._openai_agent import (
    AGENT_HEADER,
    EmptyReplyError,
    EndpointTimeoutError,
    ModelCallWatcher,
    ModelReplyError,
    OpenAIChatAgent,
    ToolsUnsupportedError,
    spent_usage,
)
from ._orchestrators import (
    AmbiguousWorkflowError,
    OrchestrationContext,
    Orchestrator,
    RolePlayOrchestrator,
    RoundRobinOrchestrator,
    WorkflowOrchestrator,
)
from ._print import PrintMessageMiddleware, render_message
from ._reasoning import strip_reasoning
from ._stop_policy import (
    COMPLETE_SIGNAL,
    ChatState,
    FinalAnswer,
    Stop,
    StopPolicy,
    StopReason,
    StopRule,
    UnsignalledCompletion,
    final_answer,
    is_solved,
    is_terminate,
    read_completion,
)
from ._tokens import (
    CHARS_PER_TOKEN,
    TokenBudgetExhaustedError,
    TokenMeter,
    estimate_tokens,
)
from ._trim import TrimContextMiddleware
from ._two_agent import GroupChatManager, initiate_chat, send

__all__ = [
    "AGENT_HEADER",
    "CHARS_PER_TOKEN",
    "CLEAR_MESSAGES",
    "COMPLETE_SIGNAL",
    "DEFAULT_MODEL",
    "HUMAN_INPUT_PROMPT",
    "TERMINATE",
    "Agent",
    "AggregateMessage",
    "AmbiguousWorkflowError",
    "AssistantAgent",
    "BaseAgent",
    "ChatResult",
    "ChatState",
    "ChatStream",
    "Condition",
    "DefaultReplyAgent",
    "EmptyReplyError",
    "EndpointTimeoutError",
    "FinalAnswer",
    "FunctionCallAttempt",
    "FunctionCallMiddleware",
    "FunctionCallRequiredError",
    "GenerateReplyOptions",
    "Graph",
    "GroupChat",
    "GroupChatManager",
    "HumanInputMiddleware",
    "HumanInputMode",
    "Message",
    "Middleware",
    "MiddlewareAgent",
    "ModelCallWatcher",
    "ModelEndpoint",
    "ModelReplyError",
    "OpenAIChatAgent",
    "OrchestrationContext",
    "Orchestrator",
    "PrintMessageMiddleware",
    "RolePlayOrchestrator",
    "RoundRobinOrchestrator",
    "Stop",
    "StopPolicy",
    "StopReason",
    "StopRule",
    "TextMessage",
    "TokenBudgetExhaustedError",
    "TokenMeter",
    "ToolCall",
    "ToolCallMessage",
    "ToolCallResult",
    "ToolChoice",
    "ToolResultMessage",
    "ToolsUnsupportedError",
    "Transition",
    "TrimContextMiddleware",
    "UnsignalledCompletion",
    "Usage",
    "UserProxyAgent",
    "WorkflowOrchestrator",
    "estimate_tokens",
    "final_answer",
    "initiate_chat",
    "is_clear",
    "is_solved",
    "is_terminate",
    "read_completion",
    "render_message",
    "send",
    "spent_usage",
    "strip_reasoning",
    "terminate_message",
    "trim_text",
    "use",
]
