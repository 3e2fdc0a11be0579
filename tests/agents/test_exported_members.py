"""The public surface of sandcrew.agents and sandcrew.testing is what we mean to publish."""

from __future__ import annotations

import sandcrew.agents
import sandcrew.testing
from sandcrew.agents import AmbiguousWorkflowError, FunctionCallRequiredError
from sandcrew.errors import ModelBehaviorError, UserError


def test_agents_exports() -> None:
    assert sorted(sandcrew.agents.__all__) == sorted(
        [
            "CLEAR_MESSAGES",
            "HUMAN_INPUT_PROMPT",
            "TERMINATE",
            "Agent",
            "AggregateMessage",
            "AmbiguousWorkflowError",
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
            "trim_text",
            "Usage",
            "UserProxyAgent",
            "WorkflowOrchestrator",
            "initiate_chat",
            "is_clear",
            "is_terminate",
            "render_message",
            "send",
            "terminate_message",
            "use",
        ]
    )
    for name in sandcrew.agents.__all__:
        assert getattr(sandcrew.agents, name) is not None


def test_testing_exports() -> None:
    assert sorted(sandcrew.testing.__all__) == sorted(
        [
            "AGENT_HEADER",
            "RecordedRequest",
            "ScriptedAgent",
            "ScriptedModelServer",
            "ScriptedToolCall",
            "Turn",
            "block_real_model_requests",
            "closed_loopback_url",
            "load_script",
        ]
    )


def test_exported_errors_derive_from_the_product_hierarchy() -> None:
    assert issubclass(FunctionCallRequiredError, ModelBehaviorError)
    assert issubclass(AmbiguousWorkflowError, UserError)


def test_agent_header_is_the_same_on_both_sides() -> None:
    from sandcrew.agents._openai_agent import AGENT_HEADER

    assert sandcrew.testing.AGENT_HEADER == AGENT_HEADER
