"""A plan's changes are written at once (db/bulk.py insert_changes: COPY on PostgreSQL): every
value reads back as it was given, and the rows belong to their transaction like any other write."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from sqlalchemy import func, select

from conftest import Tenant, make_stack
from firstlume.db.bulk import CHANGE_COLUMNS, change_records, insert_change_records, insert_changes
from firstlume.db.models import ResourceChange
from firstlume.domain.changes import changes_from_plan
from firstlume.services.context import Context
from support.runs import start


def change(position: int, **values: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "position": position,
        "address": f"terraform_data.r[{position}]",
        "type": "terraform_data",
        "unit": ".",
        "action": "create",
        "attributes": [],
        "replaced_because": [],
        "state": None,
        "error": None,
        "stages": [],
    }
    return row | values


ODD_VALUES = [
    change(0),
    change(
        1,
        address='module.a["quote\\"d\\\\ é€😀"].b',
        unit="envs/prod",
        action="replace",
        attributes=[
            {"name": "big", "before": 2**70, "after": -(2**80), "forces_replacement": True},
            {
                "name": "nested",
                "before": {"a": [1, 2.5, None, True]},
                "after": "tab\tnew\nline",
                "forces_replacement": False,
            },
            {"name": "empty", "before": "", "after": [], "forces_replacement": False},
        ],
        replaced_because=["big"],
        stages=[{"action": "delete", "state": None}, {"action": "create", "state": None}],
    ),
    change(2, action="delete", state="pending", error="an error, with 'quotes' and \\ backslashes"),
]


async def _run(ctx: Context, tenant: Tenant) -> str:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    return await start(ctx, tenant.token, tenant.org, "net", "plan")


async def _stored(ctx: Context, run_id: str) -> list[ResourceChange]:
    """The run's changes as read back, in plan order."""
    async with ctx.db.read() as session:
        return list(
            await session.scalars(
                select(ResourceChange)
                .where(ResourceChange.run_id == run_id)
                .order_by(ResourceChange.position)
            )
        )


async def test_every_value_of_a_change_reads_back_as_it_was_written(ctx: Context, tenant: Tenant) -> None:
    run_id = await _run(ctx, tenant)
    rows = [{"run_id": run_id, **row} for row in ODD_VALUES]
    async with ctx.unit() as unit:
        await insert_changes(unit.session, rows)
    stored = await _stored(ctx, run_id)
    assert [{name: getattr(s, name) for name in CHANGE_COLUMNS} for s in stored] == rows
    assert len({s.id for s in stored}) == 3  # ids from the table's own sequence


async def test_changes_written_at_once_are_rolled_back_with_their_transaction(
    ctx: Context, tenant: Tenant
) -> None:
    run_id = await _run(ctx, tenant)
    with pytest.raises(RuntimeError, match="after the changes"):
        async with ctx.unit() as unit:
            # The first statement of its transaction: the write still belongs to it.
            await insert_changes(unit.session, [{"run_id": run_id, **row} for row in ODD_VALUES])
            raise RuntimeError("a failure after the changes were written")
    async with ctx.db.read() as session:
        count = await session.scalar(select(func.count()).where(ResourceChange.run_id == run_id))
    assert count == 0


async def test_changes_are_not_written_outside_a_transaction(ctx: Context, tenant: Tenant) -> None:
    run_id = await _run(ctx, tenant)
    async with ctx.db.read() as session:
        if ctx.db.is_sqlite:
            # A read session is a transaction that is never committed: the rows go with it.
            await insert_changes(session, [{"run_id": run_id, **change(0)}])
        else:
            # PostgreSQL's read sessions autocommit each statement: a COPY there is refused.
            with pytest.raises(RuntimeError, match="in a transaction"):
                await insert_changes(session, [{"run_id": run_id, **change(0)}])
    async with ctx.db.read() as session:
        assert await session.scalar(select(func.count()).where(ResourceChange.run_id == run_id)) == 0


async def test_rows_made_from_a_plans_changes_read_back_as_the_changes(ctx: Context, tenant: Tenant) -> None:
    # The upload's path: rows made straight from the domain's changes (their attributes encoded
    # as the objects they are, by orjson, or by json beyond 64-bit integers) read back as dicts.
    run_id = await _run(ctx, tenant)
    plan = {
        "resource_changes": [
            {
                "address": "x_y.a",
                "mode": "managed",
                "type": "x_y",
                "change": {
                    "actions": ["delete", "create"],
                    "before": {"n": 2**70, "s": "é€", "l": [1, None]},
                    "after": {"n": 1, "s": "é€", "l": [2]},
                    "replace_paths": [["n"]],
                },
            },
            {
                "address": "x_y.b",
                "mode": "managed",
                "type": "x_y",
                "change": {"actions": ["create"], "before": None, "after": {"v": "x"}},
            },
        ]
    }
    changes = changes_from_plan(plan)
    async with ctx.unit() as unit:
        await insert_change_records(unit.session, change_records(run_id, changes))
    stored = await _stored(ctx, run_id)
    assert [(s.address, s.action, s.attributes, s.replaced_because, s.stages, s.state) for s in stored] == [
        (
            c.address,
            c.action,
            [dataclasses.asdict(a) for a in c.attributes],
            list(c.replaced_because),
            [{"action": action, "state": None} for action in c.stage_order],
            None,
        )
        for c in changes
    ]
    assert stored[0].attributes[1] == {"name": "n", "before": 2**70, "after": 1, "forces_replacement": True}
