"""smolagents' E2B executor, unmodified, running an agent's code steps on `sandcrew e2b`."""

from __future__ import annotations

import pytest
from smolagents.default_tools import FinalAnswerTool
from smolagents.monitoring import AgentLogger, LogLevel
from smolagents.remote_executors import E2BExecutor

from tests.e2b_server.helpers import E2bServer

pytestmark = pytest.mark.docker


def test_code_steps_keep_their_state_and_the_final_answer_comes_back(
    e2b_env: E2bServer,
) -> None:
    executor = E2BExecutor(additional_imports=[], logger=AgentLogger(level=LogLevel.OFF))
    try:
        executor.send_tools({"final_answer": FinalAnswerTool()})
        first = executor("x = 6 * 7\nprint('computed', x)")
        assert first.logs == "computed 42\n"
        assert not first.is_final_answer
        assert executor("x + 1").output == "43"
        final = executor("final_answer(x)")
        assert final.is_final_answer
        assert final.output == 42
    finally:
        executor.cleanup()
