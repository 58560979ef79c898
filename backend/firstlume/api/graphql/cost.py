"""What an operation will cost, estimated before it runs, and the limit on it.

The estimate counts the fields the response will hold: every field counts once per item of
every list above it. A list's size is its `first` (or `limit`) argument, as sent or by its
default; the list of a connection (`nodes` under `runs(first: 100)`) is that size already; any
other list counts as DEFAULT_LIST_SIZE items, unless LIST_SIZES knows better. Depth multiplies
through the lists, so `runs(first: 100) { nodes { stack { runs(first: 100) … } } }` grows as
100 to the power of its nesting and is refused, where the web UI's widest query (every change
of a run, 10,000 at once) passes.

The limit is a validation rule: graphql-core's ValidationContext holds the schema it walks. The
rule is made for the operation's name and the values of the variables that size its lists
(`cost_rule`), so strawberry's validation cache keeps its verdict with the rest of the
document's: a document asked again with the same page sizes, whatever its other variables, is
neither validated nor estimated again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

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
    SelectionNode,
    SelectionSetNode,
    ValidationRule,
    VariableNode,
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
# Cost rules kept, one per operation name and page sizes (each a key of the validation cache).
KEPT_RULES = 256


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
        # The fragments being expanded: a fragment that spreads itself, which validation
        # refuses, is not expanded again.
        self.expanding: set[str] = set()

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
                if fragment is not None and fragment.name.value not in self.expanding:
                    self.expanding.add(fragment.name.value)
                    try:
                        yield from self._fields(
                            fragment.selection_set, self._type(fragment.type_condition.name.value, parent)
                        )
                    finally:
                        self.expanding.discard(fragment.name.value)

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


def size_variables(document: DocumentNode) -> frozenset[str]:
    """The variables given to a list's size argument anywhere in the document (read before it is
    validated: every definition once, no fragment followed)."""
    names: set[str] = set()

    def read(selections: tuple[SelectionNode, ...] | list[SelectionNode]) -> None:
        for selection in selections:
            if isinstance(selection, FieldNode):
                for argument in selection.arguments or ():
                    if argument.name.value in SIZE_ARGUMENTS and isinstance(argument.value, VariableNode):
                        names.add(argument.value.name.value)
            selection_set = getattr(selection, "selection_set", None)
            if selection_set is not None:
                read(selection_set.selections)

    for definition in document.definitions:
        if isinstance(definition, OperationDefinitionNode | FragmentDefinitionNode):
            read(definition.selection_set.selections)
    return frozenset(names)


@lru_cache(maxsize=KEPT_RULES)
def cost_rule(operation_name: str | None, sizes: tuple[tuple[str, Any], ...]) -> type[ValidationRule]:
    """The rule that refuses the operation `operation_name` when its estimate, with these values
    of its size variables, exceeds MAX_COST. One class per name and sizes: the validation cache
    keys on the rules."""
    variables = dict(sizes)

    class CostRule(ValidationRule):
        def leave_document(self, node: DocumentNode, *_: Any) -> None:
            cost = estimate(self.context.schema, node, operation_name, variables)
            if cost > MAX_COST:
                self.report_error(QueryTooCostly(cost))

    return CostRule


def _hashable(value: Any) -> Any:
    # A list or an object where a size goes is refused by validation; its estimate counts it as
    # DEFAULT_LIST_SIZE, as any other value that is not a number.
    return value if not isinstance(value, list | dict) else "not a number"


class CostLimit(SchemaExtension):
    """Refuses, before it runs, an operation whose estimated cost exceeds MAX_COST: adds its cost
    rule to the rules the validation after it (strawberry's own, or its cache) applies."""

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        if context.graphql_document is not None:
            variables = context.variables or {}
            sizes = tuple(
                sorted(
                    (name, _hashable(variables[name]))
                    for name in size_variables(context.graphql_document)
                    if name in variables
                )
            )
            rule = cost_rule(context.operation_name, sizes)
            context.validation_rules = (*context.validation_rules, rule)
        yield
