from __future__ import annotations

import pytest

from sandcrew.sandbox.code import CodeBlock, extract_code_blocks, normalize_language


def test_backtick_fence_with_language() -> None:
    text = "Here you go:\n\n```python\nprint(1)\n```\n\nDone."
    assert extract_code_blocks(text) == [
        CodeBlock(code="print(1)\n", language="python", info="python")
    ]


def test_tilde_fence() -> None:
    text = "~~~bash\necho hi\n~~~\n"
    assert extract_code_blocks(text) == [CodeBlock(code="echo hi\n", language="bash", info="bash")]


def test_longer_fence_keeps_inner_backtick_fence_as_code() -> None:
    text = "````markdown\nExample:\n```python\nprint(1)\n```\n````\n"
    blocks = extract_code_blocks(text)
    assert blocks == [
        CodeBlock(code="Example:\n```python\nprint(1)\n```\n", language="markdown", info="markdown")
    ]


def test_info_string_with_extra_words() -> None:
    blocks = extract_code_blocks('```python title="fib.py" linenums\nx = 1\n```\n')
    assert blocks[0].language == "python"
    assert blocks[0].info == 'python title="fib.py" linenums'


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("py", "python"),
        ("python3", "python"),
        ("Python", "python"),
        ("sh", "bash"),
        ("shell", "bash"),
        ("bash", "bash"),
        ("JavaScript", "javascript"),
    ],
    ids=lambda value: str(value),
)
def test_language_aliases(tag: str, expected: str) -> None:
    blocks = extract_code_blocks(f"```{tag}\ncode\n```\n")
    assert blocks[0].language == expected
    assert normalize_language(tag) == expected


def test_untagged_block_has_no_language() -> None:
    blocks = extract_code_blocks("```\nplain\n```\n")
    assert blocks == [CodeBlock(code="plain\n", language=None, info="")]


def test_indented_code_is_not_a_block() -> None:
    text = "Text\n\n    print('indented')\n\nMore text\n"
    assert extract_code_blocks(text) == []


def test_text_without_blocks() -> None:
    assert extract_code_blocks("Just prose, with `inline code`.") == []
    assert extract_code_blocks("") == []


def test_several_blocks_in_order_including_nested_in_a_list() -> None:
    text = (
        "1. First:\n\n   ```py\n   a = 1\n   ```\n\n"
        "> quoted\n> ```sh\n> ls\n> ```\n\n"
        "```python\nb = 2\n```\n"
    )
    blocks = extract_code_blocks(text)
    assert [(block.language, block.code) for block in blocks] == [
        ("python", "a = 1\n"),
        ("bash", "ls\n"),
        ("python", "b = 2\n"),
    ]


def test_unclosed_fence_runs_to_the_end() -> None:
    blocks = extract_code_blocks("```python\nprint(1)\n")
    assert blocks == [CodeBlock(code="print(1)\n", language="python", info="python")]


def test_normalize_language_of_nothing() -> None:
    assert normalize_language(None) is None
    assert normalize_language("  ") is None


def test_code_block_is_frozen() -> None:
    block = CodeBlock(code="x", language=None, info="")
    with pytest.raises(ValueError, match="frozen"):
        block.code = "y"  # type: ignore[misc]
