"""Rows a change only ever appends (its audit entries, its runs' history, its outbox events) go
in with a Core INSERT on the change's connection, not through the ORM's unit of work.

Nothing reads these rows back as objects within the change, and the unit of work (its dependency
sort, its identity map, fetching each new row's key back) cost more than the INSERT itself on
every change: a third of starting a run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from sqlalchemy import JSON, Insert, Table, Text, bindparam, cast, func, insert, inspect, literal
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import make_transient_to_detached
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.sql.elements import ColumnElement

from firstlume.db.models import Base


@cache
def insert_into(table: Table) -> Insert:
    """The table's INSERT, built once: its compiled form is then found in SQLAlchemy's cache."""
    return insert(table)


# Rows a unit (services/context.py) writes as it commits, all in one round trip: the audit
# entries it recorded (services/audit.py) and its outbox events. A session without this key (not
# a unit's) writes such rows at once.
AT_COMMIT = "firstlume_rows_at_commit"
# The numbers of the runs a session's change started, by run id (services/transitions.py), for
# the NewRunNumber markers of its rows.
NEW_RUN_NUMBERS = "firstlume_new_run_numbers"


@dataclass(frozen=True)
class NewRunNumber:
    """Stands, in a JSON value of a row written at commit (an audit entry's details), for the
    number of the run `run_id` that the change starts. On PostgreSQL the statement that numbers
    the run also writes the rows recorded before it (`with_riders`), so that a start holds its
    stack's lock for that one statement and the commit: the number is not known when the row is
    recorded. Elsewhere the marker is replaced as the row is written."""

    run_id: str


def _numbered_keys(row: dict[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """(column, key, run id) of each NewRunNumber among the values of the row's JSON objects."""
    return tuple(
        (column, key, item.run_id)
        for column, value in row.items()
        if isinstance(value, dict)
        for key, item in value.items()
        if isinstance(item, NewRunNumber)
    )


def _resolved(session: AsyncSession, row: dict[str, Any]) -> dict[str, Any]:
    """`row` with its NewRunNumber markers replaced by the numbers the session's change gave."""
    marked = _numbered_keys(row)
    if not marked:
        return row
    numbers: dict[str, int] = session.info.get(NEW_RUN_NUMBERS, {})
    row = {**row}
    for column, key, run_id in marked:
        if run_id not in numbers:
            raise ValueError(
                f"a row refers to the number of run {run_id}, which this change has not numbered"
            )
        row[column] = {**row[column], key: numbers[run_id]}
    return row


async def append_rows(
    session: AsyncSession, table: Table, rows: dict[str, Any] | list[dict[str, Any]]
) -> None:
    """Inserts `rows` into `table` in the session's transaction, now."""
    if session.new:
        # A row may refer to one the change has only added so far (a new organization's first
        # audit entry): those go first.
        await session.flush()
    connection = await session.connection()
    if isinstance(rows, dict):
        rows = _resolved(session, rows)
    else:
        rows = [_resolved(session, row) for row in rows]
    await connection.execute(insert_into(table), rows)


async def append_at_commit(session: AsyncSession, table: Table, row: dict[str, Any]) -> None:
    """`row` into `table` as the session's unit commits (see AT_COMMIT); at once for another
    session. Nothing may read the row back before then."""
    pending: list[tuple[Table, dict[str, Any]]] | None = session.info.get(AT_COMMIT)
    if pending is None:
        await append_rows(session, table, row)
    else:
        pending.append((table, row))


async def write_at_commit(session: AsyncSession, rows: list[tuple[Table, dict[str, Any]]]) -> None:
    """Inserts `rows`, in their order within each table. On PostgreSQL, one row each of several
    tables go in one statement, every row but the last as a data-modifying CTE: starting a run
    writes an audit entry and an outbox event, and each round trip costs the server more than
    the rows. Otherwise one executemany per table, which keeps a table's rows (and the ids the
    database gives them, which the outbox is relayed by) in order: the CTEs of one statement
    run in no defined order."""
    one_each = len(rows) > 1 and len({id(table) for table, _ in rows}) == len(rows)
    if not one_each or session.get_bind().dialect.name == "sqlite":
        tables: dict[Table, list[dict[str, Any]]] = {}
        for table, row in rows:
            tables.setdefault(table, []).append(row)
        for table, table_rows in tables.items():
            await append_rows(session, table, table_rows)
        return
    if session.new:
        await session.flush()
    connection = await session.connection()
    shape = tuple((table, tuple(row)) for table, row in rows)
    parameters = {
        _chained_name(n, key): value
        for n, (_, row) in enumerate(rows)
        for key, value in _resolved(session, row).items()
    }
    await connection.execute(_chained_insert(shape), parameters)


def can_ride(
    rows: list[tuple[Table, dict[str, Any]]], statement_tables: Iterable[Table], run_id: str
) -> bool:
    """Whether `rows` can be written by the statement that numbers run `run_id` and writes
    `statement_tables` (`with_riders`): one row per table, none of those tables (the CTEs of one
    statement run in no defined order, and a table's rows must go in in order), and no number
    of another run."""
    tables = [table for table, _ in rows]
    return (
        len(set(tables)) == len(tables)
        and not set(tables) & set(statement_tables)
        and all(marked_run == run_id for _, row in rows for _, _, marked_run in _numbered_keys(row))
    )


def with_riders(
    statement: Insert, rows: list[tuple[Table, dict[str, Any]]], number: ColumnElement[Any]
) -> tuple[Insert, dict[str, Any]]:
    """`statement` (PostgreSQL) also inserting `rows` (checked by `can_ride`), each a
    data-modifying CTE, their NewRunNumber markers read from `number` (an expression of the
    statement's); and the parameters of those rows."""
    shape = tuple(
        (table, tuple(row), tuple((column, key) for column, key, _ in _numbered_keys(row)))
        for table, row in rows
    )
    parameters = {
        _chained_name(n, key): _unmarked(value)
        for n, (_, row) in enumerate(rows)
        for key, value in row.items()
    }
    return _with_riders(statement, shape, number), parameters


def _unmarked(value: Any) -> Any:
    """A JSON object's NewRunNumber markers as null, which the statement then sets."""
    if isinstance(value, dict) and any(isinstance(item, NewRunNumber) for item in value.values()):
        return {key: None if isinstance(item, NewRunNumber) else item for key, item in value.items()}
    return value


@lru_cache(maxsize=16)
def _with_riders(
    statement: Insert,
    shape: tuple[tuple[Table, tuple[str, ...], tuple[tuple[str, str], ...]], ...],
    number: ColumnElement[Any],
) -> Insert:
    """Built once per shape, as _chained_insert is."""
    for n, (table, keys, marked) in enumerate(shape):
        values = _bound_values(n, table, keys)
        for column, key in marked:
            # The marker's place in the object, set to the number: jsonb_set (JSON has no
            # function to set a key), so the object's keys come back in jsonb's order.
            values[column] = cast(
                func.jsonb_set(
                    cast(bindparam(_chained_name(n, column), type_=JSON), JSONB),
                    literal([key], ARRAY(Text)),
                    func.to_jsonb(number),
                ),
                table.c[column].type,
            )
        statement = statement.add_cte(insert(table).values(values).cte(f"riding_{n}"))
    return statement


def _chained_name(number: int, key: str) -> str:
    return f"row{number}_{key}"


def _bound_values(number: int, table: Table, keys: tuple[str, ...]) -> dict[str, Any]:
    """The values of the `number`th row of a chained statement: a bound parameter per column,
    named by _chained_name."""
    return {key: bindparam(_chained_name(number, key), type_=table.c[key].type) for key in keys}


@lru_cache(maxsize=64)
def _chained_insert(shape: tuple[tuple[Table, tuple[str, ...]], ...]) -> Insert:
    """One single-row INSERT per (table, columns) of `shape`, chained as CTEs, its values bound
    parameters named by _chained_name. Built once per shape, so SQLAlchemy compiles it once: the
    multi-row VALUES this replaced has no cache key in SQLAlchemy, and compiling it anew on every
    change was 40% of the server's time to start a run."""

    def single(number: int, table: Table, keys: tuple[str, ...]) -> Insert:
        return insert(table).values(_bound_values(number, table, keys))

    *first, (last_table, last_keys) = shape
    statement = single(len(first), last_table, last_keys)
    for number, (table, keys) in enumerate(first):
        statement = statement.add_cte(single(number, table, keys).cte(f"appended_{number}"))
    return statement


def new_row(obj: Base) -> dict[str, Any]:
    """Every column of a new object's row, by column name: its attributes as set, the columns'
    Python defaults (scalars and callables) for the rest, None where there is neither."""
    state = inspect(obj)
    row: dict[str, Any] = {}
    for attribute in inspect(type(obj)).column_attrs:
        column = attribute.columns[0]
        if attribute.key in state.dict:
            row[column.key] = state.dict[attribute.key]
        elif column.default is None:
            row[column.key] = None
        elif column.default.is_scalar:
            row[column.key] = column.default.arg
        elif column.default.is_callable:
            # SQLAlchemy wraps a default that takes no context in one that takes it.
            row[column.key] = column.default.arg(None)
        else:  # a SQL expression or a sequence: not used by the objects written this way
            raise ValueError(f"{column} has a default only the database knows")
    return row


def adopt(session: AsyncSession, obj: Base, row: dict[str, Any]) -> None:
    """Puts an object whose row was just inserted (as `row`) in the session as if the ORM had
    flushed it: persistent, every column loaded. Later changes to it are flushed as UPDATEs. For
    an object a change creates and then goes on using (a new run, services/transitions.py): in a
    profile of starting runs, the unit of work's flush of the new run cost about three times the
    execution of its INSERT."""
    for attribute in inspect(type(obj)).column_attrs:
        set_committed_value(obj, attribute.key, row[attribute.columns[0].key])
    make_transient_to_detached(obj)
    session.add(obj)
