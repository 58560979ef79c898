"""Set-based writes that would otherwise load thousands of ORM rows one at a time.

A plan's changes are written at once: on PostgreSQL by COPY, one stream with no SQL per row.

Planned changes keep the states of a replacement's stages in a JSON list, so moving every
change of a run means rewriting that list inside the UPDATE, with each dialect's JSON functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import ResourceChange
from firstlume.domain.changes import Change
from firstlume.domain.json_output import dumps_text
from firstlume.domain.runs import ResourceState

# {row} narrows the changes, {stage} the stages, to those in the state changes move from.
_POSTGRESQL = """
UPDATE resource_changes SET state = CAST(:to AS text), stages = CASE
    WHEN json_array_length(stages) = 0 THEN stages
    ELSE (
        SELECT json_agg(
            CASE WHEN {stage} THEN json_build_object('action', stage -> 'action', 'state', CAST(:to AS text))
            ELSE stage END ORDER BY n)
        FROM json_array_elements(resource_changes.stages) WITH ORDINALITY AS s(stage, n)
    ) END
WHERE run_id = :run_id{row}
"""
# json_each yields a list's items in order; json() keeps each item an object, not a string.
# Only a replacement has stages: the others keep their empty list untouched.
_SQLITE = """
UPDATE resource_changes SET state = :to, stages = CASE
    WHEN json_array_length(stages) = 0 THEN stages
    ELSE (
        SELECT json_group_array(json(
            CASE WHEN {stage} THEN json_object('action', json_extract(value, '$.action'), 'state', :to)
            ELSE value END))
        FROM (SELECT value FROM json_each(resource_changes.stages) ORDER BY key)
    ) END
WHERE run_id = :run_id{row}
"""
# asyncpg wants one type per parameter: PostgreSQL's are all cast to text.
_IN_STATE = {
    "postgresql": ("stage ->> 'state' = CAST(:from AS text)", " AND state = CAST(:from AS text)"),
    "sqlite": ("json_extract(value, '$.state') = :from", " AND state = :from"),
}
_SOME_LEFT = {
    "postgresql": " AND EXISTS (SELECT 1 FROM resource_changes AS other WHERE other.run_id = :run_id"
    " AND other.state <> CAST(:from AS text))",
    "sqlite": " AND EXISTS (SELECT 1 FROM resource_changes AS other WHERE other.run_id = :run_id"
    " AND other.state <> :from)",
}


async def move_change_states(
    session: AsyncSession,
    run_id: str,
    to: ResourceState,
    *,
    only_from: ResourceState | None = None,
    only_once_started: bool = False,
) -> int:
    """Moves the run's planned changes (and their stages) to `to`, only those in `only_from`
    when given, and with `only_once_started` only if some change has left `only_from`, in one
    statement. Returns how many changes moved."""
    dialect = (await session.connection()).dialect.name
    template = _SQLITE if dialect == "sqlite" else _POSTGRESQL
    params: dict[str, str] = {"run_id": run_id, "to": to.value}
    if only_from is None:
        statement = template.format(stage="TRUE", row="")
    else:
        params["from"] = only_from.value
        stage, row = _IN_STATE[dialect]
        if only_once_started:
            row += _SOME_LEFT[dialect]
        statement = template.format(stage=stage, row=row)
    result = await session.execute(text(statement), params)
    return int(result.rowcount)  # type: ignore[attr-defined]


async def count_failed_resources(session: AsyncSession, run_id: str, *, first: int) -> tuple[int, list[str]]:
    """How many of the run's changes failed, and the first `first` of their addresses in plan
    order, in one statement (the count rides along each row as a window)."""
    failed = ResourceChange.state == ResourceState.FAILED
    rows = (
        await session.execute(
            select(ResourceChange.address, func.count().over())
            .where(ResourceChange.run_id == run_id, failed)
            .order_by(ResourceChange.position)
            .limit(max(first, 1))
        )
    ).all()
    return (int(rows[0][1]) if rows else 0), [address for address, _ in rows[:first]]


# The columns a planned change is written with (its id comes from the table's sequence).
CHANGE_COLUMNS = (
    "run_id", "position", "address", "type", "unit", "action",
    "attributes", "replaced_because", "state", "error", "stages",
)  # fmt: skip
_JSON_COLUMNS = frozenset({"attributes", "replaced_because", "stages"})
_INSERT_RECORDS = (
    f"INSERT INTO {ResourceChange.__tablename__} ({', '.join(CHANGE_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in CHANGE_COLUMNS)})"
)

ChangeRecord = tuple[Any, ...]


def change_records(run_id: str, changes: Sequence[Change], first: int = 0) -> list[ChangeRecord]:
    """The rows of a plan's new changes, in CHANGE_COLUMNS' order, their JSON columns already
    text. Pure: made on the thread that worked the changes out, and straight from them (the
    encoder writes a change's attributes as the objects they are), not through a dict per row.
    `first`: the position of the first of `changes` in the plan."""
    return [
        (
            run_id,
            position,
            change.address,
            change.type,
            change.unit,
            change.action,
            dumps_text(change.attributes),
            # Only replacements have these: the rest share the empty list's text.
            dumps_text(change.replaced_because) if change.replaced_because else "[]",
            None,
            None,
            dumps_text([{"action": action, "state": None} for action in change.stage_order])
            if change.stage_order
            else "[]",
        )
        for position, change in enumerate(changes, first)
    ]


async def insert_changes(session: AsyncSession, rows: list[dict[str, Any]]) -> None:
    """Writes changes given as dicts of CHANGE_COLUMNS (JSON columns as values): see
    insert_change_records."""
    await insert_change_records(
        session,
        [
            tuple(dumps_text(row[name]) if name in _JSON_COLUMNS else row[name] for name in CHANGE_COLUMNS)
            for row in rows
        ],
    )


async def insert_change_records(session: AsyncSession, records: list[ChangeRecord]) -> None:
    """Writes a plan's changes (change_records) in the session's transaction. On PostgreSQL by
    COPY: 8,334 changes took 510 ms as multi-row INSERTs, whose parameters SQLAlchemy processes
    one by one, and take a tenth of that as one COPY. On SQLite by the driver's executemany. JSON
    columns go in as the text made by the same encoder as every other JSON column (the engine's)."""
    if not records:
        return
    connection = await session.connection()
    if connection.dialect.name != "postgresql":
        await connection.exec_driver_sql(_INSERT_RECORDS, records)
        return
    driver = (await connection.get_raw_connection()).driver_connection
    if driver is not None and not driver.is_in_transaction():
        # SQLAlchemy begins the driver's transaction with the first statement: one is sent, so
        # that the COPY is part of the transaction (on its own, it would commit by itself).
        await connection.exec_driver_sql("SELECT 1")
    if driver is None or not driver.is_in_transaction():
        raise RuntimeError("insert_changes writes in a transaction, not in an autocommit session")
    await driver.copy_records_to_table(ResourceChange.__tablename__, records=records, columns=CHANGE_COLUMNS)
