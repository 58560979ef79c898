"""What the query selects below the field being resolved: a resolver that can read more in the
same statement (a page of runs and their total) asks before it reads. Read from strawberry's
`info.selected_fields`, through fragments."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    SelectionNode,
)
from strawberry.types import Info
from strawberry.types.nodes import SelectedField, Selection


def selects(selected: Sequence[Selection], *path: str | frozenset[str]) -> bool:
    """Whether the fields `selected` (`info.selected_fields`, read once: strawberry builds them
    anew on each read) have sub-fields along `path` (schema names, not aliases; a set: any of
    them), directly or through fragments: `selects(selected, "nodes", "approval", "approvedBy")`."""
    fields: Sequence[Selection] = selected
    for step in path:
        names = frozenset({step}) if isinstance(step, str) else step
        fields = [found for field in fields for found in _named(field.selections, names)]
        if not fields:
            return False
    return True


def arguments_of(info: Info[Any, None], name: str) -> list[dict[str, Any]]:
    """The arguments (variables filled in) of each sub-field `name` of the field being resolved,
    directly or through fragments."""
    return [field.arguments for field in _subfields(info, name)]


def _subfields(info: Info[Any, None], name: str) -> Iterator[SelectedField]:
    for field in info.selected_fields:
        yield from _named(field.selections, frozenset({name}))


def _named(selections: Iterable[Selection], names: frozenset[str]) -> Iterator[SelectedField]:
    for selection in selections:
        if not isinstance(selection, SelectedField):  # a fragment, spread or inline
            yield from _named(selection.selections, names)
        elif selection.name in names:
            yield selection


def fields_named(
    selections: Any, name: str, fragments: Mapping[str, FragmentDefinitionNode], seen: set[str] | None = None
) -> Iterator[FieldNode]:
    """The fields `name` among a query's syntax tree `selections`, directly or through fragments.
    Each named fragment is read once, so that a fragment that spreads itself (which validation
    refuses) is read to its end."""
    seen = set() if seen is None else seen
    selection: SelectionNode
    for selection in selections:
        if isinstance(selection, FieldNode):
            if selection.name.value == name:
                yield selection
        elif isinstance(selection, InlineFragmentNode):
            yield from fields_named(selection.selection_set.selections, name, fragments, seen)
        elif isinstance(selection, FragmentSpreadNode):
            fragment = fragments.get(selection.name.value)
            if fragment is not None and fragment.name.value not in seen:
                seen.add(fragment.name.value)
                yield from fields_named(fragment.selection_set.selections, name, fragments, seen)
