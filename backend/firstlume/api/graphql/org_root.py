"""The organization (and the one stack in it) that a query is about, read from the query before it
runs.

Every page of the web UI is a query with one root field, `organization(slug:)`, and most of them
ask for one `stack(slug:)` in it. Such a query's caller is authenticated in the same statement
that reads the organization (if they are a member) and that stack, as a REST request in an
organization is (services/accounts.authenticate_in_org): one statement, where authenticating
and then resolving `organization` took two. Any other query authenticates as before.

Only the query's syntax is read here, once it is validated: a slug given by a variable is taken
from the request's variables when it is a string there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    OperationDefinitionNode,
    OperationType,
    StringValueNode,
    ValueNode,
    VariableNode,
)

from firstlume.api.graphql.selections import fields_named

ROOT_FIELD = "organization"
STACK_FIELD = "stack"
SLUG = "slug"


@dataclass(frozen=True)
class OrgRoot:
    """What a query is about: an organization's slug, and the slug of the one stack it asks for."""

    org: str
    stack: str | None


@dataclass(frozen=True)
class Shape:
    """Where a query names its organization and stack: a literal or a variable each."""

    org: ValueNode
    stack: ValueNode | None

    def about(self, variables: object) -> OrgRoot | None:
        values = variables if isinstance(variables, Mapping) else {}
        org = _value(self.org, values)
        if org is None:
            return None
        stack = _value(self.stack, values) if self.stack is not None else None
        return OrgRoot(org, stack)


def about_of(
    document: DocumentNode, operation_name: str | None, variables: Mapping[str, Any] | None
) -> OrgRoot | None:
    """What the operation `operation_name` of a validated document is about, if it is a query
    about one organization."""
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    chosen = next(
        (o for o in operations if operation_name is None or (o.name and o.name.value == operation_name)),
        None,
    )
    if chosen is None or chosen.operation != OperationType.QUERY:
        return None
    fragments = {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}
    shape = shape_of(chosen, fragments)
    return shape.about(variables) if shape is not None else None


def shape_of(
    operation: OperationDefinitionNode, fragments: Mapping[str, FragmentDefinitionNode]
) -> Shape | None:
    """The shape of a query whose only root field is `organization(slug:)`, with no directive
    that could leave it out; None for any other query."""
    selections = operation.selection_set.selections
    if len(selections) != 1:
        return None
    [root] = selections
    if not isinstance(root, FieldNode) or root.name.value != ROOT_FIELD or root.directives:
        return None
    org = _slug_argument(root)
    if org is None:
        return None
    # Two `stack` fields with the same literal or the same variable ask for the same stack.
    stacks: dict[tuple[str, str], ValueNode] = {}
    for field in fields_named(
        root.selection_set.selections if root.selection_set else (), STACK_FIELD, fragments
    ):
        slug = _slug_argument(field)
        if slug is not None:
            stacks.setdefault(_key(slug), slug)
    stack = next(iter(stacks.values())) if len(stacks) == 1 else None
    return Shape(org, stack)


def _slug_argument(field: FieldNode) -> ValueNode | None:
    for argument in field.arguments or ():
        if argument.name.value == SLUG and isinstance(argument.value, StringValueNode | VariableNode):
            return argument.value
    return None


def _key(value: ValueNode) -> tuple[str, str]:
    if isinstance(value, VariableNode):
        return ("variable", value.name.value)
    assert isinstance(value, StringValueNode)
    return ("literal", value.value)


def _value(node: ValueNode, variables: Mapping[str, Any]) -> str | None:
    if isinstance(node, StringValueNode):
        value: object = node.value
    else:
        assert isinstance(node, VariableNode)
        value = variables.get(node.name.value)
    # Text with NUL is refused when the query is validated (errors.py); the database could not
    # even compare it.
    return value if isinstance(value, str) and "\x00" not in value else None
