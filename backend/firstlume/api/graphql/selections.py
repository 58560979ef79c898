"""What the query selects below the field being resolved: a resolver that can read more in the
same statement (a page of runs and their total) asks before it reads.

Read from the query's syntax tree, one level down (through fragments), not from strawberry's
`info.selected_fields`: that converts the whole tree below the field, every level and every
argument, and asked by `organization` of a page of 20 runs it cost 4% of the request."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLResolveInfo,
    InlineFragmentNode,
    SelectionNode,
)
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
            yield from fields_named(node.selection_set.selections, name, raw.fragments)


def fields_named(
    selections: Any, name: str, fragments: Mapping[str, FragmentDefinitionNode], seen: set[str] | None = None
) -> Iterator[FieldNode]:
    """The fields `name` among `selections`, directly or through fragments. Each named fragment
    is read once: a query is also read before it is validated (org_root.py), when a fragment may
    still spread itself."""
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
