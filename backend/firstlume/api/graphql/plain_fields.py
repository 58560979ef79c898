"""Plain fields executed without graphql-core's per-field machinery.

For every field, graphql-core builds a resolve-info object, calls the resolver through
strawberry's wrapper, asks whether the result is awaitable and walks `complete_value`, even when
all the field does is read an attribute. A page of 20 runs is about 400 such fields, and that
machinery was about a tenth of the page's CPU.

A field is plain when it takes no arguments, its value is read from its object alone (the
attribute, by the field's own default resolver; or a resolver that needs nothing else, see
below), and its type is a scalar, an enum or an object type that checks no `is_type_of`. Such a
field's value is coerced as `complete_leaf_value` would, or its object's selection is executed
at once, with no resolve-info built. Anything else (arguments, a list or abstract type, schema
middleware, an awaitable value) takes graphql-core's path. Errors are handled by the same
`handle_field_error`, with the same messages, so a response is the same either way
(tests/test_graphql_plain_fields.py compares them).

A selection of an object type is executed in one loop (`execute_fields`): its plain fields are
read and completed there, with no call of execute_field and no response path built unless an
error, an awaitable or an object needs one. A leaf whose value needs no coercing (a str of a
String or an ID, a bool, an int an Int can hold, a member of a strawberry enum) goes into the
result as it is; other leaves are coerced as above.

A field whose resolver takes nothing but the object it is a field of (no arguments, no info, no
field extension such as a permission check, no exception handler) is called directly
(`resolve_directly`): strawberry's wrapper would build an Info, convert no arguments and chain no
extensions around it, five calls deep, for each run of a page (its stack, who started it, its
place in the queue).
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from functools import cached_property
from typing import Any, NamedTuple

from graphql import (
    GraphQLBoolean,
    GraphQLEnumType,
    GraphQLField,
    GraphQLID,
    GraphQLInt,
    GraphQLLeafType,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLResolveInfo,
    GraphQLString,
    Undefined,
    is_leaf_type,
    is_non_null_type,
)
from graphql.execution.collect_fields import FieldDetailsList, GroupedFieldSet
from graphql.execution.executor import to_nodes
from graphql.pyutils import Path, gather_with_cancel, inspect
from strawberry.schema.schema import Schema, StrawberryGraphQLCoreExecutionContext
from strawberry.schema.schema_converter import CustomGraphQLEnumType, GraphQLCoreConverter
from strawberry.types.field import StrawberryField

# Marks a resolver made by `resolve_directly`; its value is the resolver's function of the object.
DIRECT = "_firstlume_direct"


class PlainField(NamedTuple):
    read: Callable[[Any, str], Any]  # (object, python name) -> value
    python_name: str
    # Whether `read` only reads an attribute: an awaitable read then is read again by
    # graphql-core's path. A resolver is called once: its awaitable is completed here.
    attribute: bool
    leaf: GraphQLLeafType | None  # one of these two
    object_type: GraphQLObjectType | None
    non_null: bool


# Per GraphQL field of the schema (which lives as long as the process): its PlainField, or None.
_plans: dict[int, PlainField | None] = {}


def plain_field(field: GraphQLField) -> PlainField | None:
    """How to execute `field` directly, or None when it is not a plain field."""
    key = id(field)
    try:
        return _plans[key]
    except KeyError:
        pass
    _plans[key] = plan = _plan(field)
    return plan


def _without_arguments(field: GraphQLField) -> StrawberryField | None:
    """The strawberry field behind `field`, when it takes no arguments."""
    definition = (field.extensions or {}).get(GraphQLCoreConverter.DEFINITION_BACKREF)
    return definition if isinstance(definition, StrawberryField) and not field.args else None


def _plan(field: GraphQLField) -> PlainField | None:
    definition = _without_arguments(field)
    if definition is None:
        return None
    direct: Callable[[Any], Any] | None = getattr(field.resolve, DIRECT, None)
    read: Callable[[Any, str], Any]
    # strawberry marks the resolver it gives a field without resolver or extensions.
    if getattr(field.resolve, "_is_default", False) and definition.is_basic_field:
        read, attribute = definition.default_resolver, True
    elif direct is not None:
        read, attribute = (lambda source, _name: direct(source)), False
    else:
        return None
    non_null = is_non_null_type(field.type)
    inner = field.type.of_type if non_null else field.type  # type: ignore[union-attr]
    if is_leaf_type(inner):
        return PlainField(read, definition.python_name, attribute, inner, None, non_null)
    if isinstance(inner, GraphQLObjectType) and inner.is_type_of is None:
        return PlainField(read, definition.python_name, attribute, None, inner, non_null)
    return None


_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
# The Python type whose values a built-in scalar gives out unchanged.
_AS_IS: dict[str, type] = {
    GraphQLString.name: str,
    GraphQLID.name: str,
    GraphQLBoolean.name: bool,
    GraphQLInt.name: int,
}


class Coercion(NamedTuple):
    """What a leaf's quick coercion needs."""

    as_is: type | None  # values of exactly this type are given out unchanged
    names: dict[Any, str] | None  # a strawberry enum's members by identity: their names
    is_int: bool


class SelectedField(NamedTuple):
    """A field of a selection, as `execute_fields` executes it."""

    response_name: str
    field_details_list: FieldDetailsList
    field: GraphQLField
    plan: PlainField | None  # None: the field takes graphql-core's path
    coercion: Coercion | None  # for a plain leaf


# Per enum type of the schema (which lives as long as the process): its members' names, or None.
_enum_names_of: dict[int, tuple[GraphQLLeafType, dict[Any, str] | None]] = {}


def _enum_names(leaf: GraphQLLeafType) -> dict[Any, str] | None:
    """For a strawberry enum, each member's GraphQL name, as its coerce_output_value finds it
    (the first value equal to the member's)."""
    known = _enum_names_of.get(id(leaf))
    if known is None or known[0] is not leaf:
        known = _enum_names_of[id(leaf)] = (leaf, _member_names(leaf))
    return known[1]


def _member_names(leaf: GraphQLLeafType) -> dict[Any, str] | None:
    if not isinstance(leaf, CustomGraphQLEnumType) or not issubclass(leaf.wrapped_cls, enum.Enum):
        return None
    names: dict[Any, str] = {}
    for member in leaf.wrapped_cls:
        for name, value in leaf.values.items():
            if member.value == value.value:
                names[member] = name
                break
    return names


def _coercion(leaf: GraphQLLeafType) -> Coercion:
    if isinstance(leaf, GraphQLEnumType):
        return Coercion(None, _enum_names(leaf), False)
    return Coercion(_AS_IS.get(leaf.name), None, leaf.name == GraphQLInt.name)


class PlainFieldsExecutor(StrawberryGraphQLCoreExecutionContext):
    def execute_fields(
        self,
        parent_type: GraphQLObjectType,
        source_value: Any,
        path: Path | None,
        grouped_field_set: GroupedFieldSet,
        position_context: Any,
    ) -> Any:
        """graphql-core's execute_fields, with the selection's plain fields executed here and its
        quick leaves put straight into the result (see the module's docstring)."""
        selection = self._selection(parent_type, grouped_field_set)
        if selection is None:
            return super().execute_fields(
                parent_type, source_value, path, grouped_field_set, position_context
            )
        results: dict[str, Any] = {}
        is_awaitable = self.is_awaitable
        awaitable_fields: list[str] = []
        try:
            for name, details, field, plan, coercion in selection:
                if plan is None:
                    result = self.execute_field(
                        parent_type,
                        source_value,
                        details,
                        Path(path, name, parent_type.name),
                        position_context,
                    )
                    if result is Undefined:
                        continue
                else:
                    try:
                        value = plan.read(source_value, plan.python_name)
                        if coercion is not None:
                            quick = _quick_value(coercion, plan.non_null, value)
                            if quick is not _SLOW:
                                results[name] = quick
                                continue
                            if not is_awaitable(value):
                                results[name] = _complete_leaf(
                                    plan, parent_type, details[0].node.name.value, value
                                )
                                continue
                        result = self._complete_plain(
                            plan, field, parent_type, source_value, details,
                            Path(path, name, parent_type.name), value, position_context,
                        )  # fmt: skip
                    except Exception as raw_error:
                        self.handle_field_error(
                            raw_error, field.type, details, Path(path, name, parent_type.name)
                        )
                        result = None
                results[name] = result
                if is_awaitable(result):
                    awaitable_fields.append(name)
        except Exception:
            if awaitable_fields:
                self.settle_in_background([results[field] for field in awaitable_fields])
            raise
        if not awaitable_fields:
            return results
        return self._await_fields(results, awaitable_fields)

    def _selection(
        self, parent_type: GraphQLObjectType, grouped_field_set: GroupedFieldSet
    ) -> tuple[SelectedField, ...] | None:
        """The selection's fields in order, each plain or not; None when none is plain, a field
        is not in the schema, or schema middleware runs (the selection then takes graphql-core's
        path). Worked out once per selection of an operation: graphql-core collects a list's
        items' selection once, and per-event copies of a subscription's executor share it."""
        selections = self._plain_selections
        key = (id(parent_type), id(grouped_field_set))
        known = selections.get(key)
        if known is not None:
            return known[1]
        middleware = self.middleware_manager
        entries: list[SelectedField] | None = None
        if middleware is None or not middleware.middlewares:
            entries = []
            for response_name, details in grouped_field_set.items():
                node = details[0].node
                field = self.schema.get_field(parent_type, node.name.value)
                if field is None:
                    entries = None
                    break
                plan = plain_field(field) if not node.arguments else None
                coercion = _coercion(plan.leaf) if plan is not None and plan.leaf is not None else None
                entries.append(SelectedField(response_name, details, field, plan, coercion))
        chosen = tuple(entries) if entries and any(e.plan is not None for e in entries) else None
        # The set is kept with its entry, so that its id is not reused while the entry lives.
        selections[key] = (grouped_field_set, chosen)
        return chosen

    @cached_property
    def _plain_selections(
        self,
    ) -> dict[tuple[int, int], tuple[GroupedFieldSet, tuple[SelectedField, ...] | None]]:
        # In the executor's __dict__: a subscription's per-event copies share it.
        return {}

    async def _await_fields(self, results: dict[str, Any], awaitable_fields: list[str]) -> dict[str, Any]:
        # As graphql-core's execute_fields: one awaited alone, several together.
        if len(awaitable_fields) == 1:
            field = awaitable_fields[0]
            results[field] = await results[field]
        else:
            awaited = await gather_with_cancel(*(results[field] for field in awaitable_fields))
            results.update(zip(awaitable_fields, awaited, strict=True))
        return results

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
            plan = plain_field(field) if field is not None else None
            if plan is not None:
                assert field is not None
                try:
                    value = plan.read(source, plan.python_name)
                    return self._complete_plain(
                        plan, field, parent_type, source, field_details_list, path, value, position_context
                    )
                except Exception as raw_error:
                    self.handle_field_error(raw_error, field.type, field_details_list, path)
                    return None
        return super().execute_field(parent_type, source, field_details_list, path, position_context)

    def _complete_plain(
        self,
        plan: PlainField,
        field: GraphQLField,
        parent_type: GraphQLObjectType,
        source: Any,
        field_details_list: FieldDetailsList,
        path: Path,
        value: Any,
        position_context: Any,
    ) -> Any:
        """A plain field's value, read: completed as graphql-core would. Raises what
        graphql-core's execute_field would handle as the field's error."""
        if self.is_awaitable(value):
            if plan.attribute:
                return super().execute_field(parent_type, source, field_details_list, path, position_context)
            info = self.build_resolve_info(field, to_nodes(field_details_list), parent_type, path)
            return self.complete_awaitable_value(
                field.type, field_details_list, info, path, value, position_context
            )
        name = field_details_list[0].node.name.value
        if plan.leaf is not None:
            return _complete_leaf(plan, parent_type, name, value)
        completed = self._complete_object(
            plan, parent_type, name, field_details_list, path, value, position_context
        )
        if self.is_awaitable(completed):
            return self._await_completed(completed, field.type, field_details_list, path)
        return completed

    def _complete_object(
        self,
        plan: PlainField,
        parent_type: GraphQLObjectType,
        name: str,
        field_details_list: FieldDetailsList,
        path: Path,
        value: Any,
        position_context: Any,
    ) -> Any:
        """graphql-core's complete_value for an object of a type that checks no is_type_of."""
        if _null(plan, parent_type, name, value):
            return None
        assert plan.object_type is not None
        return self.collect_and_execute_subfields(
            plan.object_type, field_details_list, path, value, position_context
        )

    async def _await_completed(
        self,
        completed: Awaitable[Any],
        return_type: GraphQLOutputType,
        field_details_list: FieldDetailsList,
        path: Path,
    ) -> Any:
        # As graphql-core's execute_field: an error while the selection completes is this field's.
        try:
            return await completed
        except Exception as raw_error:
            self.handle_field_error(raw_error, return_type, field_details_list, path)
            return None


_SLOW = object()  # the quick leaf's value must take the field's own path


def _quick_value(coercion: Coercion, non_null: bool, value: Any) -> Any:
    """A leaf's value coerced, or _SLOW when completing it takes the field's own path (whose
    errors and messages are graphql-core's)."""
    if value is None or value is Undefined:
        return _SLOW if non_null else None  # a null where none may be is an error
    kind = type(value)
    if kind is coercion.as_is:
        return value if not coercion.is_int or _INT_MIN <= value <= _INT_MAX else _SLOW
    if coercion.names is not None:
        try:
            return coercion.names.get(value, _SLOW)
        except TypeError:  # unhashable
            return _SLOW
    return _SLOW


def _null(plan: PlainField, parent_type: GraphQLObjectType, name: str, value: Any) -> bool:
    """graphql-core's checks before it completes a value: an error is raised, and so is a null in
    a non-null field; True for a null it may be."""
    if isinstance(value, Exception):
        raise value
    if value is None or value is Undefined:
        if plan.non_null:
            raise TypeError(f"Cannot return null for non-nullable field {parent_type}.{name}.")
        return True
    return False


def _complete_leaf(plan: PlainField, parent_type: GraphQLObjectType, name: str, value: Any) -> Any:
    """graphql-core's complete_value for a leaf value, with its messages."""
    if _null(plan, parent_type, name, value):
        return None
    assert plan.leaf is not None
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
            definition = _without_arguments(field)
            if definition is None:
                continue
            direct = _direct(definition)
            if direct is not None and not converter._get_field_exception_handlers(definition):
                field.resolve = _resolver(direct)
                _plans.pop(id(field), None)
                changed += 1
    return changed


def _direct(definition: StrawberryField) -> Callable[[Any], Any] | None:
    """The resolver as a function of the object alone, if it needs nothing else."""
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
        return function
    return lambda _source: function()


def _resolver(direct: Callable[[Any], Any]) -> Callable[[Any, GraphQLResolveInfo[Any]], Any]:
    def resolve(source: Any, _info: GraphQLResolveInfo[Any]) -> Any:
        return direct(source)

    setattr(resolve, DIRECT, direct)
    return resolve
