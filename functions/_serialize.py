"""Turning a function's return value into the text a model reads."""

from __future__ import annotations

import json

from pydantic import BaseModel
from pydantic_core import to_jsonable_python


def serialize_result(value: object) -> str:
    """``str`` as is, ``None`` as ``""``, everything else as JSON text (never a Python repr).

    Pydantic models, dataclasses, enums, dicts, lists, tuples, sets, numbers and booleans
    become JSON. Raises ``TypeError`` for a value with no JSON form.
    """
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        if isinstance(value, BaseModel):
            jsonable = value.model_dump(mode="json")
        else:
            jsonable = to_jsonable_python(value)
        return json.dumps(jsonable, ensure_ascii=False)
    except (ValueError, TypeError) as error:
        raise TypeError(f"a {type(value).__name__} cannot be written as JSON ({error})") from error
