"""Test doubles for code built on sandcrew: a scripted OpenAI-compatible model server,
personas that replay how real chat models answer, and a sandbox and sessions with
scripted results.

Tests drive the real ``openai`` client over HTTP against :class:`ScriptedModelServer`;
nothing is patched. :func:`block_real_model_requests` makes accidental real requests fail.
"""

from sandcrew.agents import AGENT_HEADER
from sandcrew.testing._agents import ScriptedAgent
from sandcrew.testing._guard import block_real_model_requests, closed_loopback_url
from sandcrew.testing._network import LoopbackNetwork
from sandcrew.testing._personas import (
    ALL_CHECKS_PASS,
    FIBONACCI_ANSWER,
    FIBONACCI_TASK,
    PERSONAS,
    Persona,
)
from sandcrew.testing._sandbox import RecordedRun, ScriptedRun, ScriptedSandbox
from sandcrew.testing._script import ScriptedToolCall, Turn, load_script
from sandcrew.testing._server import RecordedRequest, ScriptedModelServer
from sandcrew.testing._session import (
    RecordedCell,
    RecordedCommand,
    ScriptedCell,
    ScriptedCommand,
    ScriptedSession,
)
from sandcrew.testing._templates import StrictTemplate

__all__ = [
    "AGENT_HEADER",
    "ALL_CHECKS_PASS",
    "FIBONACCI_ANSWER",
    "FIBONACCI_TASK",
    "PERSONAS",
    "LoopbackNetwork",
    "Persona",
    "RecordedCell",
    "RecordedCommand",
    "RecordedRequest",
    "RecordedRun",
    "ScriptedAgent",
    "ScriptedCell",
    "ScriptedCommand",
    "ScriptedModelServer",
    "ScriptedRun",
    "ScriptedSandbox",
    "ScriptedSession",
    "ScriptedToolCall",
    "StrictTemplate",
    "Turn",
    "block_real_model_requests",
    "closed_loopback_url",
    "load_script",
]
