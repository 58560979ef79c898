"""A start is one statement, run on PostgreSQL without BEGIN and COMMIT (db/single_write.py): the
stack's lock that numbers the run ends with the statement, not when the busy process gets round
to committing. A guard keeps such a unit to that one write, refusing any other before it runs.
(On SQLite a single-write unit is a transaction, which holds the one write lock anyway.)"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select, update
from sqlalchemy.exc import DBAPIError
from starlette.applications import Starlette

from conftest import Tenant, make_stack
from firstlume.db.engine import Database
from firstlume.db.models import OutboxEvent, Run, Stack
from firstlume.db.models_audit import AuditEntry
from firstlume.db.single_write import THE_WRITE, SingleWriteBroken
from firstlume.domain.audit import AuditAction
from firstlume.domain.runs import RunType
from firstlume.services import accounts, audit, runs
from firstlume.services.commands import StartRun
from firstlume.services.context import Actor, Context, Unit

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


async def _caller_and_stack(ctx: Context, unit: Unit, tenant: Tenant) -> tuple[Actor, Stack]:
    actor = await accounts.authenticate(unit.session, tenant.token)
    stack = await unit.session.scalar(select(Stack).where(Stack.slug == "net"))
    assert stack is not None
    return actor, stack


async def _stack_row_is_free(ctx: Context, stack_id: str) -> bool:
    async with ctx.db.transaction() as other:
        try:
            await other.execute(select(Stack.id).where(Stack.id == stack_id).with_for_update(nowait=True))
        except DBAPIError as error:
            assert "lock" in str(error).lower(), error
            return False
        return True


async def _written(ctx: Context) -> tuple[int, int, int]:
    async with ctx.db.read() as session:
        counts = [
            await session.scalar(select(func.count()).select_from(table))
            for table in (Run, OutboxEvent, AuditEntry)
        ]
    return counts[0] or 0, counts[1] or 0, counts[2] or 0


async def _numbered_in_audit(ctx: Context, run_id: str) -> int | None:
    """The run number its start's audit entry records (None without an entry)."""
    async with ctx.db.read() as session:
        entry = await session.scalar(
            select(AuditEntry).where(
                AuditEntry.target == f"run:{run_id}", AuditEntry.action == AuditAction.RUN_START
            )
        )
    return None if entry is None else int(entry.details["number"])


async def test_a_start_ends_its_hold_on_the_stack_with_its_statement(ctx: Context, tenant: Tenant) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    before = await _written(ctx)

    # As a transaction: the stack's row stays locked, and the run unseen, until the commit.
    async with ctx.unit() as unit:
        actor, stack = await _caller_and_stack(ctx, unit, tenant)
        first = await runs.start_run(unit, actor, stack, StartRun(type=RunType.PLAN))
        assert not await _stack_row_is_free(ctx, stack.id)
        assert await _written(ctx) == before

    # As a single write: both are over once the start's statement is, inside the unit.
    async with ctx.unit(single_write=True) as unit:
        actor, stack = await _caller_and_stack(ctx, unit, tenant)
        second = await runs.start_run(unit, actor, stack, StartRun(type=RunType.PLAN))
        assert await _stack_row_is_free(ctx, stack.id)
        runs_before, events_before, entries_before = before
        # Both runs, each with its outbox event and its audit entry.
        assert await _written(ctx) == (runs_before + 2, events_before + 2, entries_before + 2)
    assert (first.number, second.number) == (1, 2)
    assert unit.queue_positions == {second.id: 2}
    assert await _numbered_in_audit(ctx, second.id) == 2


@contextmanager
def simple_queries(db: Database) -> Iterator[list[str]]:
    """What the engine's connections send outside prepared statements (BEGIN, COMMIT, the
    checkout's ping), as asyncpg logs it."""
    seen: list[str] = []
    connections: list[Any] = []

    def logger(record: Any) -> None:
        seen.append(record.query.strip().upper())

    def on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        connection = dbapi_connection.driver_connection
        connection.add_query_logger(logger)
        connections.append(connection)

    from sqlalchemy import event

    event.listen(db.engine.sync_engine, "checkout", on_checkout)
    try:
        yield seen
    finally:
        event.remove(db.engine.sync_engine, "checkout", on_checkout)
        for connection in connections:
            connection.remove_query_logger(logger)


START_MUTATION = 'mutation { startRun(org: "acme", stack: "net", type: PLAN) { ... on Run { id number } } }'


async def _start(client: httpx.AsyncClient, tenant: Tenant, via: str) -> dict[str, Any]:
    """Starts a plan of the stack `net` over REST or GraphQL: the run's id and number."""
    if via == "rest":
        started = await client.post(
            "/api/v1/orgs/acme/stacks/net/runs", json={"type": "plan"}, headers=tenant.headers
        )
        assert started.status_code == 201, started.text
        return dict(started.json())
    started = await client.post("/graphql", json={"query": START_MUTATION}, headers=tenant.headers)
    assert started.status_code == 200, started.text
    return dict(started.json()["data"]["startRun"])


@pytest.mark.parametrize("via", ["rest", "graphql"])
async def test_a_start_sends_neither_begin_nor_commit(
    app: Starlette, client: httpx.AsyncClient, ctx: Context, tenant: Tenant, via: str
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    db: Database = app.state.ctx.db
    # The token's first use is recorded in a transaction of its own (services/access/tokens.py).
    assert (await client.get("/api/v1/orgs", headers=tenant.headers)).status_code == 200
    with simple_queries(db) as sent:
        run = await _start(client, tenant, via)
    assert run["number"] == 1, run
    assert not [q for q in sent if q.startswith(("BEGIN", "COMMIT"))], sent
    assert await _numbered_in_audit(ctx, run["id"]) == 1
    # The log sees transactions where there are: a cancel is one.
    with simple_queries(db) as sent:
        canceled = await client.post(f"/api/v1/orgs/acme/runs/{run['id']}/cancel", headers=tenant.headers)
    assert canceled.status_code == 200, canceled.text
    assert [q.split()[0].rstrip(";") for q in sent if q.startswith(("BEGIN", "COMMIT"))] == [
        "BEGIN",
        "COMMIT",
    ], sent


async def test_a_single_write_unit_refuses_any_other_write_before_it_runs(
    ctx: Context, tenant: Tenant
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    rename = update(Stack).where(Stack.slug == "net")

    with pytest.raises(SingleWriteBroken, match="ran another write"):
        async with ctx.unit(single_write=True) as unit:
            await unit.session.execute(rename.values(name="unmarked"))
    with pytest.raises(SingleWriteBroken, match="took a row lock"):
        async with ctx.unit(single_write=True) as unit:
            await unit.session.execute(select(Stack).with_for_update())
    with pytest.raises(SingleWriteBroken, match="wrote twice"):
        async with ctx.unit(single_write=True) as unit:
            await unit.session.execute(rename.values(name="first"), execution_options={THE_WRITE: True})
            await unit.session.execute(rename.values(name="second"), execution_options={THE_WRITE: True})
    async with ctx.db.read() as session:
        assert await session.scalar(select(Stack.name).where(Stack.slug == "net")) == "first"

    # A start with rows that cannot go in with its statement (two audit entries) is refused
    # before that statement: no run, no entry, no number taken.
    before = await _written(ctx)
    with pytest.raises(SingleWriteBroken, match="rows left to write"):
        async with ctx.unit(single_write=True) as unit:
            actor, stack = await _caller_and_stack(ctx, unit, tenant)
            for action in (AuditAction.STACK_UPDATE, AuditAction.STACK_UPDATE):
                await audit.record(unit.session, stack, action, f"stack:{stack.id}", {}, actor=actor)
            await runs.start_run(unit, actor, stack, StartRun(type=RunType.PLAN))
    assert await _written(ctx) == before
    async with ctx.db.read() as session:
        assert await session.scalar(select(Stack.run_counter).where(Stack.slug == "net")) == 0

    # Without the guard's refusals, the same unit starts a run.
    async with ctx.unit(single_write=True) as unit:
        actor, stack = await _caller_and_stack(ctx, unit, tenant)
        started = await runs.start_run(unit, actor, stack, StartRun(type=RunType.PLAN))
    assert started.number == 1
