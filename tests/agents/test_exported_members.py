"""The public surface of sandcrew.agents and sandcrew.testing is what we mean to publish."""

from __future__ import annotations

import ast
from pathlib import Path

import sandcrew.agents
import sandcrew.testing
from sandcrew.agents import AmbiguousWorkflowError, FunctionCallRequiredError
from sandcrew.errors import ModelBehaviorError, UserError


def test_agents_exports() -> None:
    assert sorted(sandcrew.agents.__all__) == sorted(
        [
            "AGENT_HEADER",
            "AssistantAgent",
            "CLEAR_MESSAGES",
            "HUMAN_INPUT_PROMPT",
            "TERMINATE",
            "Agent",
            "AggregateMessage",
            "AmbiguousWorkflowError",
            "BaseAgent",
            "ChatForm",
            "ChatFormMemory",
            "ChatResult",
            "ChatStream",
            "Condition",
            "CHARS_PER_TOKEN",
            "DEFAULT_MODEL",
            "DefaultReplyAgent",
            "EmptyReplyError",
            "EndpointTimeoutError",
            "ModelReplyError",
            "TokenBudgetExhaustedError",
            "TokenMeter",
            "ToolsUnsupportedError",
            "TruncatedReplyError",
            "estimate_tokens",
            "spent_usage",
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
            "ModelCallWatcher",
            "ModelEndpoint",
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
            "COMPLETE_SIGNAL",
            "ChatState",
            "FinalAnswer",
            "Stop",
            "StopPolicy",
            "StopRule",
            "UnsignalledCompletion",
            "final_answer",
            "is_solved",
            "read_completion",
            "strip_reasoning",
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
            "FIBONACCI_ANSWER",
            "FIBONACCI_TASK",
            "PERSONAS",
            "Persona",
            "RecordedRequest",
            "ScriptedAgent",
            "ScriptedModelServer",
            "ScriptedToolCall",
            "StrictTemplate",
            "Turn",
            "block_real_model_requests",
            "closed_loopback_url",
            "load_script",
        ]
    )


def test_exported_errors_derive_from_the_product_hierarchy() -> None:
    assert issubclass(FunctionCallRequiredError, ModelBehaviorError)
    assert issubclass(AmbiguousWorkflowError, UserError)


def test_agent_header_is_defined_once_in_agents_and_reused_by_testing() -> None:
    assert sandcrew.agents.AGENT_HEADER == "X-Sandcrew-Agent"
    assert sandcrew.testing.AGENT_HEADER is sandcrew.agents.AGENT_HEADER
    testing_sources = Path(sandcrew.testing.__file__).parent.glob("*.py")
    redefined = [path.name for path in testing_sources if _assigns("AGENT_HEADER", path)]
    assert redefined == []


def _assigns(name: str, path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(target, ast.Name) and target.id == name for target in targets):
            return True
    return False
