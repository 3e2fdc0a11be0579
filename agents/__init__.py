"""Multi-agent chat with AutoGen.NET's semantics: messages, middleware, a model agent,
function calls, human input, and group chats with round-robin, workflow and role-play
speaker selection — with typed termination, budgets and stop reasons.

Middleware order: ``agent.use(a).use(b)`` runs ``b`` first (outermost), then ``a``, then the
agent — the last registered middleware runs first, as in AutoGen.NET.
"""

from sandcrew._text import trim_middle as trim_text
from sandcrew.agents._agent import (
    Agent,
    BaseAgent,
    DefaultReplyAgent,
    GenerateReplyOptions,
    Middleware,
    MiddlewareAgent,
    ToolChoice,
    use,
)
from sandcrew.agents._function_call import (
    FunctionCallAttempt,
    FunctionCallMiddleware,
    FunctionCallRequiredError,
)
from sandcrew.agents._graph import Condition, Graph, Transition
from sandcrew.agents._group_chat import ChatResult, ChatStream, GroupChat, StopReason
from sandcrew.agents._human import (
    HUMAN_INPUT_PROMPT,
    AssistantAgent,
    HumanInputMiddleware,
    HumanInputMode,
    UserProxyAgent,
)
from sandcrew.agents._messages import (
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
    is_terminate,
    terminate_message,
)
from sandcrew.agents._openai_agent import AGENT_HEADER, OpenAIChatAgent
from sandcrew.agents._orchestrators import (
    AmbiguousWorkflowError,
    OrchestrationContext,
    Orchestrator,
    RolePlayOrchestrator,
    RoundRobinOrchestrator,
    WorkflowOrchestrator,
)
from sandcrew.agents._print import PrintMessageMiddleware, render_message
from sandcrew.agents._trim import TrimContextMiddleware
from sandcrew.agents._two_agent import GroupChatManager, initiate_chat, send

__all__ = [
    "AGENT_HEADER",
    "CLEAR_MESSAGES",
    "HUMAN_INPUT_PROMPT",
    "TERMINATE",
    "Agent",
    "AggregateMessage",
    "AmbiguousWorkflowError",
    "AssistantAgent",
    "BaseAgent",
    "ChatResult",
    "ChatStream",
    "Condition",
    "DefaultReplyAgent",
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
    "OpenAIChatAgent",
    "OrchestrationContext",
    "Orchestrator",
    "PrintMessageMiddleware",
    "RolePlayOrchestrator",
    "RoundRobinOrchestrator",
    "StopReason",
    "TextMessage",
    "ToolCall",
    "ToolCallMessage",
    "ToolCallResult",
    "ToolChoice",
    "ToolResultMessage",
    "Transition",
    "TrimContextMiddleware",
    "Usage",
    "UserProxyAgent",
    "WorkflowOrchestrator",
    "initiate_chat",
    "is_clear",
    "is_terminate",
    "render_message",
    "send",
    "terminate_message",
    "trim_text",
    "use",
]
