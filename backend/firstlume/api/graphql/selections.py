"""What the query selects below the field being resolved: a resolver that can read more in the
same statement (a page of runs and their total) asks before it reads.

Read from the query's syntax tree, one level down (through fragments), not from strawberry's
`info.selected_fields`: that converts the whole tree below the field, every level and every
argument, and asked by `organization` of a page of 20 runs it cost 4% of the request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from graphql import FieldNode, FragmentSpreadNode, GraphQLResolveInfo, InlineFragmentNode, SelectionNode
from strawberry.types import Info
from strawberry.types.nodes import convert_arguments


def selects(info: Info[Any, None], name: str) -> bool:
    """Whether the field being resolved has the sub-field `name` (its schema name, not an alias),
    directly or through fragments."""
    return any(True for _ in _subfields(info._raw_info, name))


def arguments_of(info: Info[Any, None], name: str) -> list[dict[str, Any]]:
    """The arguments (variables filled in) of each sub-field `name` of the field being resolved,
    directly or through fragments."""
    raw = info._raw_info
    return [convert_arguments(raw, field.arguments) for field in _subfields(raw, name)]


def _subfields(raw: GraphQLResolveInfo[Any], name: str) -> Iterator[FieldNode]:
    for node in raw.field_nodes:
        if node.selection_set is not None:
            yield from _named(raw, node.selection_set.selections, name)


def _named(raw: GraphQLResolveInfo[Any], selections: Any, name: str) -> Iterator[FieldNode]:
    selection: SelectionNode
    for selection in selections:
        if isinstance(selection, FieldNode):
            if selection.name.value == name:
                yield selection
        elif isinstance(selection, InlineFragmentNode):
            yield from _named(raw, selection.selection_set.selections, name)
        elif isinstance(selection, FragmentSpreadNode):
            fragment = raw.fragments.get(selection.name.value)
            if fragment is not None:
                yield from _named(raw, fragment.selection_set.selections, name)
