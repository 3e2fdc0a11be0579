"""The rendered tools are what the ``openai`` package expects, and survive a real request."""

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionToolParam
from pydantic import TypeAdapter

from tests.functions.golden_functions import GOLDEN_TOOLS, golden_file_name, review_code_block

RENDERINGS = [
    pytest.param(tool, strict, id=golden_file_name(tool, strict))
    for tool, modes in GOLDEN_TOOLS
    for strict in modes
]
TOOL_PARAM_TYPES = [ChatCompletionFunctionToolParam, ChatCompletionToolParam]


@pytest.mark.parametrize("param_type", TOOL_PARAM_TYPES, ids=lambda t: t.__name__)
@pytest.mark.parametrize(("tool", "strict"), RENDERINGS)
def test_rendering_is_accepted_by_the_openai_typed_params(tool, strict, param_type) -> None:
    rendered = tool.contract.to_openai_tool(strict=strict)
    validated = TypeAdapter(param_type).validate_python(rendered, strict=True)
    # TypedDicts drop unknown keys silently: equality shows nothing was dropped.
    assert validated == rendered


REVIEW_ARGUMENTS = {
    "has_multiple_code_blocks": False,
    "is_top_level_statement": True,
    "is_python_code_block": True,
    "is_print_result_to_console": False,
}


class _ChatCompletionsHandler(BaseHTTPRequestHandler):
    """Answers POST /v1/chat/completions with one call to review_code_block."""

    received: list[dict[str, Any]]

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        if self.path != "/v1/chat/completions":
            self.send_error(404)
            return
        self.server.received.append(body)  # type: ignore[attr-defined]
        answer = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {
                                    "name": "review_code_block",
                                    "arguments": json.dumps(REVIEW_ARGUMENTS),
                                },
                            }
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        payload = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass


@pytest.fixture
def loopback_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ThreadingHTTPServer]:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatCompletionsHandler)
    server.received = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_openai_client_sends_the_rendered_tool_and_its_call_validates(
    loopback_server: ThreadingHTTPServer,
) -> None:
    port = loopback_server.server_address[1]
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="test", max_retries=0)
    tool_json = review_code_block.to_openai_tool()
    try:
        completion = client.chat.completions.create(
            model="test-model",
            messages=[{"role": "user", "content": "Review this code."}],
            tools=[tool_json],
        )
    finally:
        client.close()

    [request] = loopback_server.received  # type: ignore[attr-defined]
    assert request["tools"] == [tool_json]
    assert request["tools"][0]["function"]["strict"] is True

    [call] = completion.choices[0].message.tool_calls or []
    assert call.type == "function"
    result = review_code_block.call_json(call.function.arguments)
    assert result.ok
    assert result.content == "The code does not print its result to the console."
