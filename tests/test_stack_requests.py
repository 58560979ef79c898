"""A request about one stack (starting a run) finds the caller, their role and the stack in one
statement, and refuses in the same order as reading them one after the other: the token, the
organization, the role, then the stack. A reader never learns which stacks exist."""

from __future__ import annotations

import asyncio

import httpx
from sqlalchemy import select, text

from conftest import Tenant, make_stack, make_tenant
from firstlume.db.models import OutboxEvent, Run, Stack
from firstlume.db.models_audit import AuditEntry
from firstlume.domain.audit import AuditAction
from firstlume.domain.runs import INITIAL, TRANSITIONS, RunStatus, RunType, TriggerKind
from firstlume.services import accounts, audit, dispatch, runs
from firstlume.services.access.roles import Role
from firstlume.services.commands import StartRun
from firstlume.services.context import Context
from support.statements import StatementCounter
from support.waiting import until


async def _token(ctx: Context, org: str, email: str, role: Role) -> dict[str, str]:
    async with ctx.unit() as unit:
        token = await accounts.create_token(unit.session, org, email, role=role)
    return {"Authorization": f"Bearer {token}"}


async def test_starting_a_run_refuses_token_organization_role_then_stack(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    await make_tenant(ctx, "globex", "grace@example.com")
    reader = await _token(ctx, "acme", "rita@example.com", Role.READER)

    async def start(org: str, stack: str, headers: dict[str, str]) -> httpx.Response:
        return await client.post(
            f"/api/v1/orgs/{org}/stacks/{stack}/runs", json={"type": "plan"}, headers=headers
        )

    bad_token = await start("acme", "nope", {"Authorization": "Bearer fl_forged"})
    assert bad_token.status_code == 401
    outsider = await start("globex", "nope", tenant.headers)
    assert outsider.status_code == 404 and outsider.json()["error"]["message"] == "No organization 'globex'."
    refused = await start("acme", "net", reader)
    assert refused.status_code == 403, refused.text
    # A role is the stack's since folder grants (a grant on its folder may raise it), so the
    # stack is found first: a reader, who may list the stacks anyway, learns nothing new.
    unknown = await start("acme", "nope", reader)
    assert unknown.status_code == 404 and unknown.json()["error"]["message"] == "No stack 'nope'."
    missing = await start("acme", "nope", tenant.headers)
    assert missing.status_code == 404 and missing.json()["error"]["message"] == "No stack 'nope'."
    started = await start("acme", "net", tenant.headers)
    assert started.status_code == 201 and started.json()["stack"] == "net" and started.json()["number"] == 1


async def test_concurrent_starts_each_answer_their_own_queue_position_without_reading_the_queue(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, app_statements: StatementCounter
) -> None:
    # A run's position comes back with its first history row: no statement reads the queue
    # afterwards. Starts that race each other still get distinct positions, in number order,
    # since each took the stack's run number under its row lock.
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    url = "/api/v1/orgs/acme/stacks/net/runs"
    first = await client.post(url, json={"type": "plan"}, headers=tenant.headers)
    assert first.status_code == 201 and first.json()["queue_position"] == 1

    with app_statements.counting() as statements:
        one = await client.post(url, json={"type": "plan"}, headers=tenant.headers)
    assert one.status_code == 201 and one.json()["queue_position"] == 2
    queue_reads = [s for s in statements if s.lstrip().startswith("SELECT") and "FROM runs" in s]
    assert queue_reads == [], queue_reads

    started = await asyncio.gather(
        *(client.post(url, json={"type": "plan"}, headers=tenant.headers) for _ in range(8))
    )
    assert all(r.status_code == 201 for r in started), [r.text for r in started]
    positions = sorted((r.json()["number"], r.json()["queue_position"]) for r in started)
    assert positions == [(number, number) for number in range(3, 11)]


async def test_a_start_counts_its_place_past_claimed_and_canceled_runs_as_a_read_of_the_queue_does(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    # A start's position is worked out from the first queued number and the canceled runs after
    # it (services/transitions.py), not by counting the queue: it must still agree with what a
    # count of the queue says, with runs started, canceled at the front, in the middle and last.
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    url = "/api/v1/orgs/acme/stacks/net/runs"

    async def start() -> tuple[str, int]:
        started = await client.post(url, json={"type": "plan"}, headers=tenant.headers)
        assert started.status_code == 201, started.text
        return started.json()["id"], started.json()["queue_position"]

    async def cancel(run_id: str) -> None:
        canceled = await client.post(f"/api/v1/orgs/acme/runs/{run_id}/cancel", headers=tenant.headers)
        assert canceled.status_code == 200, canceled.text

    async def counted(run_id: str) -> int:
        read = await client.get(f"/api/v1/orgs/acme/runs/{run_id}", headers=tenant.headers)
        assert read.status_code == 200, read.text
        return int(read.json()["queue_position"])

    ids = [(await start())[0] for _ in range(6)]
    [claimed] = await dispatch.claim_plans(ctx)  # run 1 starts: it leaves the queue
    assert claimed.run_id == ids[0]
    await cancel(ids[1])  # now the queue's first
    await cancel(ids[3])  # in its middle
    seventh, position = await start()
    assert position == await counted(seventh) == 4  # runs 3, 5, 6 and itself
    await cancel(seventh)  # the last
    await cancel(ids[2])
    eighth, position = await start()
    assert position == await counted(eighth) == 3  # runs 5, 6 and itself
    for run_id in ids[4:]:
        await cancel(run_id)
    ninth, position = await start()  # the queue is empty but for itself
    assert position == await counted(ninth) == 2  # the eighth is still queued
    await cancel(eighth)
    tenth, position = await start()
    assert position == await counted(tenth) == 2


def test_the_queue_is_entered_only_at_the_start_and_left_only_to_plan_or_be_canceled() -> None:
    # What a start's position rests on (services/transitions.py _queue_position): every run is
    # created queued, nothing returns to the queue, and a queued run leaves it only to start (the
    # stack's first: services/dispatch.py) or to be canceled. A new way out of the queue, or back
    # into it, must change how the position is worked out.
    assert INITIAL is RunStatus.QUEUED
    assert TRANSITIONS[RunStatus.QUEUED] == {RunStatus.PLANNING, RunStatus.CANCELED}
    assert not any(RunStatus.QUEUED in targets for targets in TRANSITIONS.values())


async def test_a_start_that_waited_for_the_stack_counts_the_start_it_waited_for(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    # A start that waited for the stack's lock (the counter's row on PostgreSQL; on SQLite the
    # second start waits before its transaction begins) must count the start it waited for,
    # which committed meanwhile, in its position.
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    async with ctx.unit() as unit:  # holds the stack's lock until it commits
        actor = await accounts.authenticate(unit.session, tenant.token)
        stack = await unit.session.scalar(select(Stack).where(Stack.slug == "net"))
        assert stack is not None
        first = await runs.start_run(unit, actor, stack, StartRun(type=RunType.PLAN))
        second = asyncio.create_task(
            client.post("/api/v1/orgs/acme/stacks/net/runs", json={"type": "plan"}, headers=tenant.headers)
        )
        if not ctx.db.is_sqlite:
            await _until_a_statement_waits_for_a_lock(ctx)
    started = await asyncio.wait_for(second, 30)
    assert first.number == 1 and unit.queue_positions[first.id] == 1
    assert started.status_code == 201, started.text
    assert (started.json()["number"], started.json()["queue_position"]) == (2, 2)


async def _until_a_statement_waits_for_a_lock(ctx: Context) -> None:
    waiting = text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )

    async def a_statement_waits() -> bool:
        async with ctx.db.read() as session:
            return bool(await session.scalar(waiting))

    await until(a_statement_waits, 30, "the second start to wait for the lock", interval=0.02)


async def test_starting_a_run_again_compiles_no_statement_anew(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, app_statements: StatementCounter
) -> None:
    # Compiling a statement costs more than running it: a start whose INSERTs had no cache key
    # (literal multi-row VALUES) spent 40% of its server time in SQLAlchemy's compiler. Every
    # statement of a start, once seen, must come from the compiled cache.
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    await make_stack(ctx, tenant, {"slug": "web", "repository": "file:///repo"})
    first = await client.post(
        "/api/v1/orgs/acme/stacks/net/runs", json={"type": "plan"}, headers=tenant.headers
    )
    assert first.status_code == 201, first.text
    with app_statements.counting() as statements:
        again = await client.post(
            "/api/v1/orgs/acme/stacks/web/runs", json={"type": "apply"}, headers=tenant.headers
        )
    assert again.status_code == 201 and again.json()["number"] == 1, again.text
    assert any("INSERT INTO outbox" in s for s in statements), statements
    assert app_statements.compiled_anew == [], app_statements.compiled_anew


async def test_a_new_run_is_one_insert_with_its_defaults_and_later_changes_are_updates(
    ctx: Context, tenant: Tenant
) -> None:
    # A started run comes back complete (every column's default) and stays in the session, so
    # that what the same change does to it afterwards is written too, as an UPDATE.
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    counter = StatementCounter(ctx.db)
    try:
        with counter.counting() as statements:
            async with ctx.unit() as unit:
                actor = await accounts.authenticate(unit.session, tenant.token)
                org = await accounts.org_for(unit.session, actor, tenant.org)
                stack = await unit.session.scalar(select(Stack).where(Stack.org_id == org.id))
                assert stack is not None
                started = await runs.start_run(unit, actor, stack, StartRun(type=RunType.APPLY))
                # The written object, still in the session (start_run answers with a read model).
                run = await unit.session.get(Run, started.id)
                assert run is not None and run in unit.session and run.id
                assert (run.number, run.status, run.trigger_kind) == (1, RunStatus.QUEUED, TriggerKind.MANUAL)
                assert (run.acknowledged, run.variables_used, run.failed_resource_addresses) == ([], [], [])
                assert (run.has_plan, run.summary_create, run.failed_resource_count) == (False, 0, 0)
                assert run.created_at is not None and run.created_at == run.updated_at
                assert run.finished_at is None and run.approved_by_id is None
                run.error = "changed within the same change"
    finally:
        counter.close()
    inserts = [s for s in statements if "INSERT INTO runs " in s]
    assert len(inserts) == 1, inserts
    histories = [s for s in statements if "INSERT INTO run_status_history " in s]
    assert len(histories) == 1, histories
    assert unit.queue_positions == {run.id: 1}
    # Its audit entry and its outbox event, one INSERT each.
    audits = [s for s in statements if "INSERT INTO audit_entries " in s]
    events = [s for s in statements if "INSERT INTO outbox " in s]
    assert len(audits) == len(events) == 1, statements
    assert [s for s in statements if s.lstrip().startswith("UPDATE runs")], statements
    async with ctx.db.read() as session:
        stored = await session.get(Run, run.id)
        assert stored is not None
        assert (stored.number, stored.status, stored.error) == (1, RunStatus.QUEUED, run.error)
        assert (stored.acknowledged, stored.has_plan, stored.created_at) == ([], False, run.created_at)
        entry = await session.scalar(select(AuditEntry).where(AuditEntry.target == f"run:{run.id}"))
        assert entry is not None and (entry.action, entry.actor) == ("run.start", tenant.email)
        assert entry.details == {"number": 1, "type": "apply"}
        event = await session.scalar(select(OutboxEvent).where(OutboxEvent.kind == "status"))
        assert event is not None and event.payload["run_id"] == run.id


async def test_a_unit_that_starts_several_runs_records_each_start_with_its_number_in_order(
    ctx: Context, tenant: Tenant
) -> None:
    # Each start's audit entry names the number its run was given, and a unit's entries and
    # events keep the order they were recorded in, after what the unit recorded before.
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    await make_stack(ctx, tenant, {"slug": "web", "repository": "file:///repo"})
    async with ctx.unit() as unit:
        actor = await accounts.authenticate(unit.session, tenant.token)
        org = await accounts.org_for(unit.session, actor, tenant.org)
        stacks = {s.slug: s for s in await unit.session.scalars(select(Stack).where(Stack.org_id == org.id))}
        await audit.record(unit.session, org, AuditAction.SETTINGS_UPDATE, "org:acme", {"changed": []})
        web = await runs.start_run(unit, actor, stacks["web"], StartRun(type=RunType.PLAN))
        first_net = await runs.start_run(unit, actor, stacks["net"], StartRun(type=RunType.PLAN))
        net = await runs.start_run(unit, actor, stacks["net"], StartRun(type=RunType.APPLY))
    async with ctx.db.read() as session:
        entries = list(
            await session.scalars(
                select(AuditEntry)
                .where(AuditEntry.action.in_(["settings.update", "run.start"]))
                .order_by(AuditEntry.id)
            )
        )
        events = list(
            await session.scalars(
                select(OutboxEvent).where(OutboxEvent.kind == "status").order_by(OutboxEvent.id)
            )
        )
    assert [(e.action, e.details.get("number")) for e in entries] == [
        ("settings.update", None),
        ("run.start", 1),
        ("run.start", 1),
        ("run.start", 2),
    ]
    assert entries[-1].target == f"run:{net.id}" and entries[1].target == f"run:{web.id}"
    assert entries[-1].details == {"number": 2, "type": "apply"}
    assert [e.payload["run_id"] for e in events] == [web.id, first_net.id, net.id]
