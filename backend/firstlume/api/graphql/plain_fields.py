"""Plain leaf fields (an attribute that is a scalar or an enum, no resolver, no arguments)
executed without graphql-core's per-field machinery.

For every field, graphql-core builds a resolve-info object, calls the resolver through
strawberry's wrapper, asks whether the result is awaitable and walks `complete_value`, even when
all the field does is read an attribute. A page of 20 runs is about 300 such fields, and that
machinery was about a tenth of the page's CPU. Here such a field reads the attribute with the
field's own default resolver and coerces it as `complete_leaf_value` would; anything else (a
resolver, arguments, an object or list type, schema middleware, an awaitable value) takes
graphql-core's path. Errors are handled by the same `handle_field_error`, with the same messages,
so a response is the same either way (tests/test_graphql_plain_fields.py compares them).

A field whose resolver takes nothing but the object it is a field of (no arguments, no info, no
field extension such as a permission check, no exception handler) is called directly
(`resolve_directly`): strawberry's wrapper would build an Info, convert no arguments and chain no
extensions around it, five calls deep, for each run of a page (its stack, who started it, its
place in the queue: a twelfth of a page's server time).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from graphql import (
    GraphQLField,
    GraphQLLeafType,
    GraphQLObjectType,
    GraphQLResolveInfo,
    Undefined,
    is_leaf_type,
    is_non_null_type,
)
from graphql.execution.collect_fields import FieldDetailsList
from graphql.pyutils import Path, inspect
from strawberry.schema.schema import Schema, StrawberryGraphQLCoreExecutionContext
from strawberry.schema.schema_converter import GraphQLCoreConverter
from strawberry.types.field import StrawberryField


class PlainLeaf(NamedTuple):
    read: Callable[[Any, str], Any]  # the field's default resolver: getattr, unless configured
    python_name: str
    leaf: GraphQLLeafType
    non_null: bool


# Per GraphQL field of the schema (which lives as long as the process): its PlainLeaf, or None.
_plans: dict[int, PlainLeaf | None] = {}


def plain_leaf(field: GraphQLField) -> PlainLeaf | None:
    """How to execute `field` directly, or None when it is not a plain leaf field."""
    key = id(field)
    try:
        return _plans[key]
    except KeyError:
        pass
    plan = None
    definition = (field.extensions or {}).get(GraphQLCoreConverter.DEFINITION_BACKREF)
    # strawberry marks the resolver it gives a field without resolver or extensions.
    if (
        isinstance(definition, StrawberryField)
        and getattr(field.resolve, "_is_default", False)
        and not field.args
        and definition.is_basic_field
    ):
        non_null = is_non_null_type(field.type)
        leaf = field.type.of_type if non_null else field.type  # type: ignore[union-attr]
        if is_leaf_type(leaf):
            plan = PlainLeaf(definition.default_resolver, definition.python_name, leaf, non_null)
    _plans[key] = plan
    return plan


class PlainFieldsExecutor(StrawberryGraphQLCoreExecutionContext):
    def execute_field(
        self,
        parent_type: GraphQLObjectType,
        source: Any,
        field_details_list: FieldDetailsList,
        path: Path,
        position_context: Any,
    ) -> Any:
        node = field_details_list[0].node
        middleware = self.middleware_manager
        if not node.arguments and (middleware is None or not middleware.middlewares):
            field = self.schema.get_field(parent_type, node.name.value)
            plan = plain_leaf(field) if field is not None else None
            if plan is not None:
                try:
                    value = plan.read(source, plan.python_name)
                    if not self.is_awaitable(value):
                        return _complete(plan, parent_type, node.name.value, value)
                except Exception as raw_error:
                    assert field is not None
                    self.handle_field_error(raw_error, field.type, field_details_list, path)
                    return None
        return super().execute_field(parent_type, source, field_details_list, path, position_context)


def _complete(plan: PlainLeaf, parent_type: GraphQLObjectType, name: str, value: Any) -> Any:
    """graphql-core's complete_value for a leaf value, with its messages."""
    if isinstance(value, Exception):
        raise value
    if value is None or value is Undefined:
        if plan.non_null:
            raise TypeError(f"Cannot return null for non-nullable field {parent_type}.{name}.")
        return None
    coerced = plan.leaf.coerce_output_value(value)
    if coerced is Undefined or coerced is None:
        raise TypeError(
            f"Expected `{inspect(plan.leaf)}.coerce_output_value({inspect(value)})` to return"
            f" non-nullable value, returned: {inspect(coerced)}"
        )
    return coerced


def resolve_directly(schema: Schema) -> int:
    """Gives each field whose resolver needs only its object a resolver that calls it with just
    that; returns how many fields it gave one."""
    converter = schema.schema_converter
    changed = 0
    for graphql_type in schema._schema.type_map.values():
        if not isinstance(graphql_type, GraphQLObjectType) or graphql_type.name.startswith("__"):
            continue
        for field in graphql_type.fields.values():
            definition = (field.extensions or {}).get(GraphQLCoreConverter.DEFINITION_BACKREF)
            if not isinstance(definition, StrawberryField) or field.args:
                continue
            direct = _direct(definition)
            if direct is not None and not converter._get_field_exception_handlers(definition):
                field.resolve = direct
                changed += 1
    return changed


def _direct(definition: StrawberryField) -> Callable[[Any, GraphQLResolveInfo[Any]], Any] | None:
    resolver = definition.base_resolver
    if (
        resolver is None
        or definition.extensions
        or definition.is_subscription
        or resolver.arguments
        or resolver.info_parameter
        or resolver.root_parameter
        or resolver.parent_parameter
        or not callable(resolver.wrapped_func)
    ):
        return None
    function = resolver.wrapped_func
    if resolver.self_parameter:
        return lambda source, _info: function(source)
    return lambda _source, _info: function()
