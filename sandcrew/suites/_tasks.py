"""The tasks a regression suite is made of, as validated value objects.

Two kinds exist, told apart by ``kind``:

* an *answer* task asks a question whose answer is checked against an expected
  value (exact text, a number within a tolerance, or a regular expression);
* a *code* task (HumanEval style) asks for a function; a completion passes when
  ``check(entry_point)``, run after ``prompt + completion + test`` in a container,
  returns normally (the sealed harness vouches for that, not the exit code 0).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    field_validator,
)

_ID_PATTERN = re.compile(r"^\S(.*\S)?$")


class ExactAnswer(BaseModel):
    """The answer, stripped of surrounding whitespace, equals ``exact``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    exact: str


class NumberAnswer(BaseModel):
    """Some number in the answer is within ``tolerance`` of ``number``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    number: Decimal
    tolerance: Decimal = Decimal(0)

    @field_validator("tolerance")
    @classmethod
    def _not_negative(cls, value: Decimal) -> Decimal:
        if value < 0:
            raise ValueError(f"tolerance must be >= 0 (got {value})")
        return value


class RegexAnswer(BaseModel):
    """The regular expression ``regex`` is found somewhere in the answer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    regex: str

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as error:
            raise ValueError(f"regex does not compile: {error}") from None
        return value


def _expected_kind(value: Any) -> str | None:
    if isinstance(value, BaseModel):
        return next(iter(type(value).model_fields))
    if isinstance(value, dict):
        return next((key for key in _EXPECTED_KEYS if key in value), None)
    return None


_EXPECTED_KEYS = ("exact", "number", "regex")

Expected = Annotated[
    Annotated[ExactAnswer, Tag("exact")]
    | Annotated[NumberAnswer, Tag("number")]
    | Annotated[RegexAnswer, Tag("regex")],
    Discriminator(
        _expected_kind,
        custom_error_type="expected_kind",
        custom_error_message="must be a number, a text, or a mapping with one of the keys "
        "exact, number (and tolerance) or regex",
    ),
]
"""What an answer task's answer is checked against."""


class _TaskBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    id: str = Field(validation_alias=AliasChoices("id", "task_id"))
    """Unique within its suite; ``task_id`` is accepted as a synonym (HumanEval)."""
    prompt: str
    tags: tuple[str, ...] = ()
    timeout: float | None = None
    """Seconds one container run of this task may take; ``None``: the run's default."""
    reference_time: float | None = None
    """Seconds the reference solution's check takes, where known; a relative time limit
    (:class:`~sandcrew.suites.RelativeTimeLimit`) scales it."""

    @field_validator("id")
    @classmethod
    def _sensible_id(cls, value: str) -> str:
        if not _ID_PATTERN.match(value):
            raise ValueError(f"id must be non-empty without surrounding spaces (got {value!r})")
        return value

    @field_validator("timeout", "reference_time")
    @classmethod
    def _positive_seconds(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and not value > 0:
            raise ValueError(f"{info.field_name} must be > 0 (got {value:g})")
        return value

    def matches(self, pattern: str) -> bool:
        """Whether ``pattern`` matches the id or a tag.

        A pattern with a wildcard (``*``, ``?``, ``[``) is a glob matched against
        the whole id or tag; any other pattern matches as a substring.
        """
        names = (self.id, *self.tags)
        if any(char in pattern for char in "*?["):
            return any(fnmatch.fnmatchcase(name, pattern) for name in names)
        return any(pattern in name for name in names)


class AnswerTask(_TaskBase):
    """A question with one checkable answer; ``solution`` is code printing it."""

    kind: Literal["answer"] = "answer"
    expected: Expected
    solution: str | None = None
    """Python code whose printed output contains the answer (used by ``canonical``)."""

    @field_validator("expected", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        # `expected: 42` and `expected: "Paris"` are shorthands for the mappings.
        if isinstance(value, bool):
            return value
        if isinstance(value, int | float):
            return {"number": value}
        if isinstance(value, str):
            return {"exact": value}
        return value


class CodeTask(_TaskBase):
    """A HumanEval-style function to complete and the test code that checks it."""

    kind: Literal["code"] = "code"
    entry_point: str
    test: str
    """Code defining ``check(candidate)``, which raises when the candidate is wrong."""
    canonical_solution: str | None = None
    """A known-good completion (appended to ``prompt``), used by ``canonical``."""

    @field_validator("entry_point")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not value.isidentifier():
            raise ValueError(f"entry_point must be a Python identifier (got {value!r})")
        return value


Task = Annotated[AnswerTask | CodeTask, Field(discriminator="kind")]
"""Any task; ``kind`` says which."""


class Suite(BaseModel):
    """A named, ordered collection of tasks with unique ids."""

    model_config = ConfigDict(frozen=True)

    name: str
    source: str
    """Where the tasks came from (a file path or a package resource)."""
    tasks: tuple[Task, ...]

    def filtered(self, patterns: Iterable[str]) -> Suite:
        """The tasks whose id or a tag matches any of ``patterns`` (all when none given)."""
        wanted = tuple(patterns)
        if not wanted:
            return self
        kept = tuple(task for task in self.tasks if any(task.matches(p) for p in wanted))
        return self.model_copy(update={"tasks": kept})

    def task(self, task_id: str) -> AnswerTask | CodeTask:
        """The task with id ``task_id``; ``KeyError`` when there is none."""
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(task_id)
