"""llama-cpp-python's OpenAI-compatible server answering with a Jinja chat template of ours.

Usage: python benchmarks/llama_template_server.py TEMPLATE.json SERVER-ARGS...

TEMPLATE.json holds ``chat_template``, ``bos_token`` and ``eos_token`` (the keys of a
Hugging Face tokenizer_config.json). The template is rendered the way Transformers, vLLM and
llama.cpp's ``--jinja`` render a model's own: ``raise_exception`` refuses a conversation, and
the server answers that refusal with an HTTP error carrying its message. (The server's own
``--chat_format hf-tokenizer-config`` provides no ``raise_exception`` and closes the prompt
with an empty assistant turn, so it cannot stand for a strict template.)
"""

from __future__ import annotations

import json
import sys

from llama_cpp import llama_chat_format  # type: ignore[import-not-found]
from llama_cpp.server.__main__ import main  # type: ignore[import-not-found]

FORMAT_NAME = "sandcrew-template"


def register(path: str) -> None:
    with open(path, encoding="utf-8") as file:
        config = json.load(file)
    formatter = llama_chat_format.Jinja2ChatFormatter(
        template=config["chat_template"],
        eos_token=config["eos_token"],
        bos_token=config["bos_token"],
    )
    llama_chat_format.LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(
        FORMAT_NAME, formatter.to_chat_handler(), overwrite=True
    )


if __name__ == "__main__":
    template, *server_args = sys.argv[1:]
    register(template)
    sys.argv = [sys.argv[0], *server_args, "--chat_format", FORMAT_NAME]
    main()
