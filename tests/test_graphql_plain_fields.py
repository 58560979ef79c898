"""Plain leaf fields skip graphql-core's per-field machinery (api/graphql/plain_fields.py): the
response must be exactly what graphql-core's own path gives, errors included, and the shortcut
must actually be taken."""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Any

import pytest
import strawberry
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from firstlume.api.graphql.plain_fields import PlainFieldsExecutor, plain_field, resolve_directly
from firstlume.api.graphql.schema import schema as firstlume_schema


@strawberry.enum
class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


async def _later() -> str:
    return "awaited"


@strawberry.type
class Item:
    name: str
    count: int
    color: Color
    at: datetime
    note: str | None = None
    weight: float | None = None
    later: str | None = None  # holds an awaitable: graphql-core's path awaits it
    broken: int | None = None  # holds a value an Int cannot be

    @strawberry.field
    def shout(self, times: int = 1) -> str:
        return self.name.upper() * times


def _items() -> list[Item]:
    at = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    first = Item(name="a", count=1, color=Color.RED, at=at, note="n", weight=1.5)
    second = Item(name="b", count=2, color=Color.BLUE, at=at)
    second.broken = "not a number"  # type: ignore[assignment]
    third = Item(name="c", count=3, color=Color.RED, at=at)
    third.name = None  # type: ignore[assignment]  # null in a non-null field
    fourth = Item(name="d", count=4, color=Color.BLUE, at=at)
    fourth.weight = ValueError("a value that is an error")  # type: ignore[assignment]
    fourth.later = _later()  # type: ignore[assignment]
    return [first, second, third, fourth]


@strawberry.type
class Query:
    @strawberry.field
    def items(self) -> list[Item | None]:
        return _items()  # type: ignore[return-value]


QUERY = """{ items { name count color at note weight later broken shout(times: 2) alias: name
                     ... on Item { count } } }"""


class Counting:
    infos = 0

    def build_resolve_info(self, *args: Any) -> Any:
        type(self).infos += 1
        return super().build_resolve_info(*args)  # type: ignore[misc]


class CountingPlain(Counting, PlainFieldsExecutor):
    infos = 0


class CountingCore(Counting, StrawberryGraphQLCoreExecutionContext):
    infos = 0


def _outcome(result: Any) -> tuple[Any, list[tuple[str, list[Any]]]]:
    errors = sorted((e.message, list(e.path or [])) for e in result.errors or [])
    return result.data, errors


async def test_plain_fields_answer_exactly_as_graphql_core_does_errors_included() -> None:
    plain = strawberry.Schema(query=Query, execution_context_class=CountingPlain)
    core = strawberry.Schema(query=Query, execution_context_class=CountingCore)
    fast, slow = await plain.execute(QUERY), await core.execute(QUERY)
    assert _outcome(fast) == _outcome(slow)
    data, errors = _outcome(fast)
    assert data["items"][0] == {
        "name": "a", "count": 1, "color": "RED", "at": "2026-12-01T09:30:00+00:00", "note": "n",
        "weight": 1.5, "later": None, "broken": None, "shout": "AA", "alias": "a",
    }  # fmt: skip
    assert data["items"][2] is None  # the null in a non-null field nulls its item
    assert (data["items"][3]["later"], data["items"][3]["weight"], data["items"][3]["count"]) == (
        "awaited",
        None,
        4,
    )
    assert [message.split(":")[0] for message, _ in errors] == [
        "Cannot return null for non-nullable field Item.name.",
        "Int cannot represent non-integer value",
        "a value that is an error",
    ], errors
    # graphql-core builds an info for every field it executes: the list, and ten fields of each
    # item but the third, which stops at its first (null) field. The plain path builds them only
    # for the list, the resolver field `shout` (three items get that far) and the awaitable.
    assert CountingCore.infos == 1 + 3 * 10 + 1
    assert CountingPlain.infos == 1 + 3 + 1


@pytest.mark.parametrize(
    ("type_name", "field", "plain"),
    [
        ("Run", "number", True),
        ("Run", "status", True),  # an enum
        ("Run", "createdAt", True),
        ("Run", "commit", True),  # an object
        ("Run", "stack", True),  # a resolver of the run alone
        ("Run", "queuePosition", True),
        ("Run", "changes", False),  # arguments
        ("Run", "stateBackends", False),  # a list
        ("Organization", "audit", False),  # a permission check
    ],
)
def test_which_fields_of_the_schema_are_plain(type_name: str, field: str, plain: bool) -> None:
    graphql_type = firstlume_schema._schema.get_type(type_name)
    assert graphql_type is not None
    assert (plain_field(graphql_type.fields[field]) is not None) is plain  # type: ignore[union-attr]


class Refused(Exception):
    pass


def _item(name: str | None) -> Item:
    item = Item(name="x", count=1, color=Color.RED, at=datetime(2026, 12, 1, tzinfo=UTC))
    item.name = name  # type: ignore[assignment]  # None: null in a non-null field
    return item


@strawberry.type
class Box:
    label: str
    held: Item | None = None  # an object in an attribute

    @strawberry.field
    def loud(self) -> str:
        return self.label.upper()

    @strawberry.field
    async def later(self) -> str:
        return self.label + " later"

    @strawberry.field
    def inner(self) -> Item | None:
        return _item(self.label) if self.label != "none" else None

    @strawberry.field
    def broken(self) -> Item | None:  # its non-null name is null: it is null, with an error
        return _item(None)

    @strawberry.field
    def must(self) -> Item:  # null for "none": the whole box is null
        return _item("m") if self.label != "none" else None  # type: ignore[return-value]

    @strawberry.field
    async def awaited(self) -> Item:
        return _item("w")

    @strawberry.field
    async def must_later(self) -> Item:  # null for "none", once awaited
        return None if self.label == "none" else _item("ml")  # type: ignore[return-value]

    @strawberry.field
    def nested(self) -> Box | None:  # its selection below is awaited
        return Box(label="none") if self.label == "a" else Box(label="n")

    @strawberry.field
    def refused(self) -> str | None:
        raise Refused(f"no {self.label}")

    @strawberry.field
    def with_info(self, info: strawberry.Info) -> str:
        return info.field_name


@strawberry.type
class BoxQuery:
    @strawberry.field
    def boxes(self) -> list[Box | None]:
        return [Box(label="a", held=_item("h")), Box(label="none"), Box(label="b")]


BOX_QUERY = """{ boxes { label loud later inner { name } broken { name count } must { name }
                       awaited { name } held { name } nested { label later mustLater { name } }
                       refused withInfo } }"""


async def test_resolvers_of_the_object_alone_are_called_directly_with_the_same_answers() -> None:
    direct = strawberry.Schema(query=BoxQuery, execution_context_class=PlainFieldsExecutor)
    # loud, later, inner, broken, must, awaited, mustLater, nested and refused (of Box) and boxes
    # (of the query); not withInfo, which takes the info.
    assert resolve_directly(direct) == 10
    core = strawberry.Schema(query=BoxQuery, execution_context_class=StrawberryGraphQLCoreExecutionContext)
    fast, slow = await direct.execute(BOX_QUERY), await core.execute(BOX_QUERY)
    assert _outcome(fast) == _outcome(slow)
    data, errors = _outcome(fast)
    assert data["boxes"][0] == {
        "label": "a", "loud": "A", "later": "a later", "inner": {"name": "a"}, "broken": None,
        "must": {"name": "m"}, "awaited": {"name": "w"}, "held": {"name": "h"}, "nested": None,
        "refused": None, "withInfo": "withInfo",
    }  # fmt: skip
    assert data["boxes"][1] is None  # its non-null `must` was null
    assert data["boxes"][2]["held"] is None and data["boxes"][2]["inner"] == {"name": "b"}
    assert data["boxes"][2]["nested"] == {"label": "n", "later": "n later", "mustLater": {"name": "ml"}}
    assert errors == [
        ("Cannot return null for non-nullable field Box.must.", ["boxes", 1, "must"]),
        ("Cannot return null for non-nullable field Box.mustLater.", ["boxes", 0, "nested", "mustLater"]),
        ("Cannot return null for non-nullable field Item.name.", ["boxes", 0, "broken", "name"]),
        ("Cannot return null for non-nullable field Item.name.", ["boxes", 1, "broken", "name"]),
        ("Cannot return null for non-nullable field Item.name.", ["boxes", 2, "broken", "name"]),
        ("no a", ["boxes", 0, "refused"]),
        ("no b", ["boxes", 2, "refused"]),
    ], errors


@pytest.mark.parametrize(
    ("type_name", "field", "direct"),
    [
        ("Run", "stack", True),
        ("Run", "createdBy", True),
        ("Run", "queuePosition", True),
        ("Run", "steps", True),  # async: its awaitable is awaited by graphql-core, as before
        ("Run", "number", False),  # no resolver of its own
        ("Run", "changes", False),  # arguments
        ("Organization", "audit", False),  # a permission check
    ],
)
def test_which_resolvers_of_the_schema_are_called_directly(type_name: str, field: str, direct: bool) -> None:
    graphql_type = firstlume_schema._schema.get_type(type_name)
    assert graphql_type is not None
    resolver = graphql_type.fields[field].resolve  # type: ignore[union-attr]
    strawberry_wrapper = getattr(resolver, "_is_default", None) is not None
    assert (resolver is not None and not strawberry_wrapper) is direct


class CountingFields:
    executed = 0

    def execute_field(self, *args: Any) -> Any:
        type(self).executed += 1
        return super().execute_field(*args)  # type: ignore[misc]


class FieldsPlain(CountingFields, PlainFieldsExecutor):
    executed = 0


class FieldsCore(CountingFields, StrawberryGraphQLCoreExecutionContext):
    executed = 0


@strawberry.enum
class Shade(enum.Enum):
    DARK = "dark"
    GLOOMY = "dark"  # an alias: the member is DARK, named as graphql-core names it
    LIGHT = "light"


class Label(str):
    pass


@strawberry.type
class Row:
    name: str
    count: int
    shade: Shade
    at: datetime
    ok: bool
    id: strawberry.ID
    note: str | None = None
    small: int | None = None  # holds what an Int may not: too large, a bool, a float
    tag: str | None = None  # holds a str subclass, a number or a bool


@strawberry.type
class RowQuery:
    @strawberry.field
    def rows(self) -> list[Row]:
        at = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
        rows = [
            Row(name=f"r{n}", count=n, shade=Shade.LIGHT, at=at, ok=n % 2 == 0, id=strawberry.ID(f"id{n}"))
            for n in range(50)
        ]
        rows[1].shade, rows[2].shade = Shade.GLOOMY, Shade.DARK
        rows[3].small, rows[4].small, rows[5].small = 2**31, True, 1.0  # type: ignore[assignment]
        rows[6].small, rows[7].small = 2**31 - 1, -(2**31)
        rows[8].tag, rows[9].tag, rows[10].tag = Label("x"), 7, False  # type: ignore[assignment]
        rows[11].note = "a note"
        return rows


ROW_QUERY = "{ rows { name count shade at ok id note small tag again: name } }"


async def test_a_selection_of_plain_fields_is_executed_in_one_loop() -> None:
    quick = strawberry.Schema(query=RowQuery, execution_context_class=FieldsPlain)
    core = strawberry.Schema(query=RowQuery, execution_context_class=FieldsCore)
    fast, slow = await quick.execute(ROW_QUERY), await core.execute(ROW_QUERY)
    assert _outcome(fast) == _outcome(slow)
    data, errors = _outcome(fast)
    rows = data["rows"]
    assert rows[0] == {
        "name": "r0", "count": 0, "shade": "LIGHT", "at": "2026-12-02T08:00:00+00:00", "ok": True,
        "id": "id0", "note": None, "small": None, "tag": None, "again": "r0",
    }  # fmt: skip
    assert [rows[n]["shade"] for n in (1, 2)] == ["DARK", "DARK"]
    assert [rows[n]["small"] for n in (3, 4, 5, 6, 7)] == [None, 1, 1, 2**31 - 1, -(2**31)]
    assert [rows[n]["tag"] for n in (8, 9, 10)] == ["x", "7", "false"]
    assert rows[11]["note"] == "a note"
    assert [message.split(":")[0] for message, _ in errors] == [
        "Int cannot represent non 32-bit signed integer value"
    ]
    # graphql-core executes each field of each row; the plain path executes only the list: each
    # row's fields are read and completed in the selection's own loop, the values the quick
    # coercion leaves (three odd `small`s and three odd `tag`s) by graphql-core's coercion.
    assert FieldsCore.executed == 1 + 50 * 10
    assert FieldsPlain.executed == 1
