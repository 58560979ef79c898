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
    return any(_has(field.selections, name) for field in info.selected_fields)


def _has(selections: Iterable[Selection], name: str) -> bool:
    for selection in selections:
        if isinstance(selection, SelectedField):
            if selection.name == name:
                return True
        elif _has(selection.selections, name):  # a fragment: its own selections
            return True
    return False
