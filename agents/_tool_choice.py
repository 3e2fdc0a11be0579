"""The ``tool_choice`` forms a request can take, tried in turn on servers that reject some."""

from __future__ import annotations

from typing import Any

from ._agent import ToolChoice


def offered_names(request: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for tool in request.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


def choice_key(choice: Any) -> str:
    if isinstance(choice, dict):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        return f"named:{name}"
    return str(choice)


def choice_label(choice: ToolChoice | None) -> str:
    if choice is None:
        return "(none sent)"
    if isinstance(choice, dict):
        return f"named {choice_key(choice).removeprefix('named:')!r}"
    return repr(choice)


def choice_forms(asked: Any, offered: list[str]) -> list[ToolChoice | None]:
    """``asked`` first, then the other forms that still offer the same tools (``None``:
    send no ``tool_choice`` and let the server decide)."""
    named: list[ToolChoice | None] = (
        [{"type": "function", "function": {"name": offered[0]}}] if len(offered) == 1 else []
    )
    forced = isinstance(asked, dict) or asked == "required"
    others: list[ToolChoice | None] = (
        [*named, "required", "auto", None] if forced else ["auto", *named, "required", None]
    )
    forms: list[ToolChoice | None] = [asked]
    forms.extend(form for form in others if form != asked)
    return forms


def with_choice(request: dict[str, Any], choice: ToolChoice | None) -> dict[str, Any]:
    updated = {key: value for key, value in request.items() if key != "tool_choice"}
    if choice is not None:
        updated["tool_choice"] = choice
    return updated
