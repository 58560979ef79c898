"""What an operation will cost, estimated before it runs, and the limit on it.

The estimate counts the fields the response will hold: every field counts once per item of
every list above it. A list's size is its `first` (or `limit`) argument, as sent or by its
default; the list of a connection (`nodes` under `runs(first: 100)`) is that size already; any
other list counts as DEFAULT_LIST_SIZE items, unless LIST_SIZES knows better. Depth multiplies
through the lists, so `runs(first: 100) { nodes { stack { runs(first: 100) … } } }` grows as
100 to the power of its nesting and is refused, where the web UI's widest query (every change
of a run, 10,000 at once) passes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

import orjson
from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLField,
    GraphQLInterfaceType,
    GraphQLList,
    GraphQLNamedType,
    GraphQLObjectType,
    GraphQLSchema,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    get_named_type,
    get_nullable_type,
)
from graphql.pyutils import Undefined
from graphql.utilities import value_from_ast
from strawberry.extensions import SchemaExtension

# The most a single operation may cost: fields in the response, counted as above. The widest
# query of the web UI (RunChanges: 10,000 changes with their attributes) costs about 540,000;
# tests/test_graphql_query_cost.py checks every operation of the web UI against the limit.
MAX_COST = 1_000_000
# Items assumed in a list that takes no `first`: folders, stacks, variables of one level.
DEFAULT_LIST_SIZE = 10
SIZE_ARGUMENTS = ("first", "limit", "last")
# Lists whose size is known better than the default: a change group's changes are a share of
# the page its group belongs to, so together they are no more than that page.
# A resource change has at most a plan and an apply stage.
LIST_SIZES: Mapping[str, int] = {"ChangeGroup.changes": 1, "ResourceChange.stages": 2}
# Estimates kept per operation text, operation name and variables: clients send the same few
# operations with the same few variables, and an estimate walks the whole document (a
# fortieth of a stack page's server time).
KEPT_ESTIMATES = 256


class QueryTooCostly(GraphQLError):
    def __init__(self, cost: int) -> None:
        super().__init__(
            f"This query would cost about {cost:,} (fields times list sizes) and the limit is "
            f"{MAX_COST:,}: ask for smaller pages (`first`) or fewer nested lists.",
            extensions={"code": "query_too_costly", "cost": cost, "limit": MAX_COST},
        )


def estimate(
    schema: GraphQLSchema, document: DocumentNode, operation_name: str | None, variables: Mapping[str, Any]
) -> int:
    fragments = {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}
    operation = _operation(document, operation_name)
    if operation is None:
        return 0
    root = schema.get_root_type(operation.operation)
    if root is None:
        return 0
    return _Estimator(schema, fragments, variables).selections(operation.selection_set, root, 1, False)


_estimates: OrderedDict[tuple[str, str | None, bytes], int] = OrderedDict()


def known_estimate(
    schema: GraphQLSchema,
    document: DocumentNode,
    text: str | None,
    operation_name: str | None,
    variables: Mapping[str, Any],
) -> int:
    """`estimate`, of a document parsed from `text`, kept for the next time it is asked (not
    kept for a document given without its text)."""
    key = _estimate_key(text, operation_name, variables)
    if key is None:
        return estimate(schema, document, operation_name, variables)
    cost = _estimates.get(key)
    if cost is None:
        cost = estimate(schema, document, operation_name, variables)
        _estimates[key] = cost
        if len(_estimates) > KEPT_ESTIMATES:
            _estimates.popitem(last=False)
    return cost


def _estimate_key(
    text: str | None, operation_name: str | None, variables: Mapping[str, Any]
) -> tuple[str, str | None, bytes] | None:
    if text is None:
        return None
    try:
        return (text, operation_name, orjson.dumps(variables, option=orjson.OPT_SORT_KEYS))
    except TypeError:  # variables that are not JSON (those read from a request always are)
        return None


def _operation(document: DocumentNode, name: str | None) -> OperationDefinitionNode | None:
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    for operation in operations:
        if name is None or (operation.name and operation.name.value == name):
            return operation
    return None


class _Estimator:
    def __init__(
        self,
        schema: GraphQLSchema,
        fragments: Mapping[str, FragmentDefinitionNode],
        variables: Mapping[str, Any],
    ) -> None:
        self.schema = schema
        self.fragments = fragments
        self.variables = variables

    def selections(
        self, selection_set: SelectionSetNode, parent: GraphQLNamedType, items: int, sized: bool
    ) -> int:
        """The cost of a selection set on `items` objects of type `parent`; `sized` when those
        objects are a connection whose page size is already counted in `items`."""
        total = 0
        leaves: set[tuple[str, str]] = set()
        for field, on in self._fields(selection_set, parent):
            if field.selection_set is None:
                # A leaf selected twice (by two fragments) is in the response once.
                key = (on.name, (field.alias or field.name).value)
                if key in leaves:
                    continue
                leaves.add(key)
            definition = on.fields.get(field.name.value)
            if definition is None:  # __typename and other meta fields
                total += items
                continue
            size, is_list = (
                self._size(field, definition),
                isinstance(get_nullable_type(definition.type), GraphQLList),
            )
            if size is not None:
                here = items * size
            elif is_list:
                here = items * (
                    1 if sized else LIST_SIZES.get(f"{on.name}.{field.name.value}", DEFAULT_LIST_SIZE)
                )
            else:
                here = items
            total += here
            if field.selection_set is not None:
                named = get_named_type(definition.type)
                total += self.selections(field.selection_set, named, here, size is not None and not is_list)
        return total

    def _fields(
        self, selection_set: SelectionSetNode, parent: GraphQLNamedType
    ) -> Iterator[tuple[FieldNode, GraphQLObjectType | GraphQLInterfaceType]]:
        """Every field of the set, fragments expanded, with the type it is selected on."""
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                if isinstance(parent, GraphQLObjectType | GraphQLInterfaceType):
                    yield selection, parent
            elif isinstance(selection, InlineFragmentNode):
                on = self._type(
                    selection.type_condition.name.value if selection.type_condition else None, parent
                )
                yield from self._fields(selection.selection_set, on)
            elif isinstance(selection, FragmentSpreadNode):
                fragment = self.fragments.get(selection.name.value)
                if fragment is not None:
                    yield from self._fields(
                        fragment.selection_set, self._type(fragment.type_condition.name.value, parent)
                    )

    def _type(self, name: str | None, parent: GraphQLNamedType) -> GraphQLNamedType:
        found = self.schema.get_type(name) if name else None
        return found or parent

    def _size(self, field: FieldNode, definition: GraphQLField) -> int | None:
        for name in SIZE_ARGUMENTS:
            argument = definition.args.get(name)
            if argument is None:
                continue
            node = next((a for a in field.arguments or () if a.name.value == name), None)
            value = value_from_ast(node.value, argument.type, dict(self.variables)) if node else Undefined
            if value is Undefined or value is None:
                value = argument.default_value
            if isinstance(value, int) and not isinstance(value, bool):
                return max(value, 0)
            return DEFAULT_LIST_SIZE
        return None


class CostLimit(SchemaExtension):
    """Refuses, before it runs, an operation whose estimated cost exceeds MAX_COST."""

    def on_validate(self) -> Iterator[None]:
        # Runs after ValidationCache has validated the document (an invalid one, which could
        # hold a fragment cycle, is never estimated) and before Strawberry checks for errors:
        # what is set here takes the place of execution.
        context = self.execution_context
        validated = context.pre_execution_errors is not None and not context.pre_execution_errors
        if validated and context.graphql_document is not None:
            cost = known_estimate(
                context.schema._schema,
                context.graphql_document,
                context.query,
                context.operation_name,
                context.variables or {},
            )
            if cost > MAX_COST:
                context.pre_execution_errors = [QueryTooCostly(cost)]
        yield
