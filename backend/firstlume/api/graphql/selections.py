"""What the query selects below the field being resolved: a resolver that can read more in the
same statement (a page of runs and their total) asks before it reads."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from strawberry.types import Info
from strawberry.types.nodes import SelectedField, Selection


def selects(info: Info[Any, None], name: str) -> bool:
    """Whether the field being resolved has the sub-field `name` (its schema name, not an alias),
    directly or through fragments."""
    return bool(arguments_of(info, name))


def arguments_of(info: Info[Any, None], name: str) -> list[dict[str, Any]]:
    """The arguments (variables filled in) of each sub-field `name` of the field being resolved,
    directly or through fragments."""
    found: list[dict[str, Any]] = []
    for field in info.selected_fields:
        _collect(field.selections, name, found)
    return found


def _collect(selections: Iterable[Selection], name: str, found: list[dict[str, Any]]) -> None:
    for selection in selections:
        if isinstance(selection, SelectedField):
            if selection.name == name:
                found.append(selection.arguments)
        else:
            _collect(selection.selections, name, found)  # a fragment: its own selections
