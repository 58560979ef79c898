"""A committed change is never answered with a 500 because its event could not be published, and
its event is not lost: the outbox relay publishes it once the broker is back. The PostgreSQL event
connection comes back by itself after the server ends it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy import select
from starlette.applications import Starlette

from conftest import (
    PG_SERVER,
    Tenant,
    _asyncpg_url,
    _pg_admin,
    make_stack,
)
from firstlume.db.models import OutboxEvent, ResourceChange, Run, RunStep, Stack
from firstlume.domain.runs import ResourceState, RunStatus, StepStatus
from firstlume.protocol.events import Event, LogAppended, RunStatusChanged
from firstlume.pubsub import APPLICATION_NAME, PublishFailed, PubSub, Subscription, org_runs_channel
from firstlume.services import accounts
from firstlume.services.context import Context
from support.pg_roles import limited_role
from support.pubsub_waits import publish_until_delivered
from support.waiting import until

O = "/api/v1/orgs/acme"


class Broker:
    """Puts the app's pub/sub out of service: every publish fails as if its connection were down."""

    def __init__(self, pubsub: PubSub) -> None:
        self.is_down = False
        self.refused = 0
        real = pubsub.publish

        async def publish(channel: str, event: Event) -> None:
            if self.is_down:
                self.refused += 1
                raise PublishFailed("The broker is down (test).")
            await real(channel, event)

        real_many = pubsub.publish_many

        async def publish_many(events: Sequence[tuple[str, Event]]) -> None:
            if self.is_down:
                self.refused += len(events)
                raise PublishFailed("The broker is down (test).")
            await real_many(events)

        pubsub.publish = publish  # type: ignore[method-assign]
        pubsub.publish_many = publish_many  # type: ignore[method-assign]


async def exactly(heard: Subscription, count: int) -> list[Event]:
    """`count` events, each waited for at most 10 s, and not one more already there."""
    received: list[Event] = []
    while len(received) < count:
        event = await heard.next(seconds=10)
        assert event is not None, f"only {len(received)} events arrived"
        received.append(event)
    assert heard.pending() == []
    return received


async def awaiting_approval(ctx: Context, tenant: Tenant) -> tuple[str, str]:
    """(org id, run id) of a run awaiting approval with a few planned changes."""
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    async with ctx.unit() as unit:
        actor = await accounts.authenticate(unit.session, tenant.token)
        org = await accounts.org_for(unit.session, actor, tenant.org)
        stack = await unit.session.scalar(select(Stack).where(Stack.org_id == org.id, Stack.slug == "net"))
        assert stack is not None
        stack.run_counter = 1
        run = Run(
            org_id=org.id, stack_id=stack.id, number=1, type="apply", status=RunStatus.AWAITING_APPROVAL,
            acknowledged=[], variables_used=[], state_backends=[], has_plan=True, summary_create=3,
        )  # fmt: skip
        unit.session.add(run)
        await unit.session.flush()
        for i in range(3):
            unit.session.add(
                ResourceChange(
                    run_id=run.id,
                    position=i,
                    address=f"terraform_data.r{i}",
                    type="terraform_data",
                    unit=".",
                    action="create",
                    attributes=[],
                    replaced_because=[],
                    stages=[],
                )
            )
        unit.session.add(RunStep(run_id=run.id, name="approval", position=0, status=StepStatus.RUNNING))
        return org.id, run.id


async def test_a_broker_outage_after_commit_answers_success_and_the_events_arrive_once_it_is_back(
    app: Starlette, client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    app_ctx: Context = app.state.ctx
    broker = Broker(app_ctx.pubsub)
    org_id, waiting = await awaiting_approval(ctx, tenant)
    async with app_ctx.pubsub.subscribe(org_runs_channel(org_id)) as heard:
        broker.is_down = True
        started = await client.post(
            f"{O}/stacks/net/runs", headers=tenant.headers, content='{"type": "plan"}'
        )
        assert started.status_code == 201, started.text
        # Approval also sends best-effort wake-ups (its step, its resources): they fail quietly.
        approved = await client.post(f"{O}/runs/{waiting}/approve", headers=tenant.headers, content="{}")
        assert approved.status_code == 200, approved.text
        new_run = started.json()["id"]

        # Both changes are saved, and their events wait in the outbox after a failed attempt.
        async def tried_and_waiting() -> bool:
            async with ctx.db.transaction() as session:
                rows = list(await session.scalars(select(OutboxEvent).order_by(OutboxEvent.id)))
            return len(rows) == 2 and all(r.published_at is None and r.attempts >= 1 for r in rows)

        await until(tried_and_waiting, 30, "the relay's first, failed attempt")
        assert broker.refused >= 3  # the relay's attempt and the approval's two wake-ups
        assert (await client.get(f"{O}/runs/{waiting}", headers=tenant.headers)).json()[
            "status"
        ] == "apply_queued"
        assert heard.pending() == []

        broker.is_down = False
        received = [await heard.next(seconds=30), await heard.next(seconds=30)]
    assert received == [
        RunStatusChanged(run_id=new_run, org_id=org_id, status=RunStatus.QUEUED, from_status=None),
        RunStatusChanged(
            run_id=waiting,
            org_id=org_id,
            status=RunStatus.APPLY_QUEUED,
            from_status=RunStatus.AWAITING_APPROVAL,
        ),
    ]

    # The relay marks them published when its pass commits, just after sending them.
    async def all_published() -> bool:
        async with ctx.db.transaction() as session:
            return all(r.published_at is not None for r in await session.scalars(select(OutboxEvent)))

    await until(all_published, 30, "the outbox rows marked published")
    async with ctx.db.transaction() as session:
        assert set(await session.scalars(select(ResourceChange.state))) == {ResourceState.PENDING}


# PostgreSQL ends the connections -------------------------------------------------------------


@pytest.fixture
def pg_database(pg_template: str) -> Iterator[str]:
    """A database of this test's own, so that ending its connections touches nobody else's."""
    name = f"fl_ev_{uuid.uuid4().hex[:10]}"
    asyncio.run(_pg_admin(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"'))
    yield name
    asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def terminate(database: str, *, application_name: str | None = None) -> int:
    """Ends the backends of `database` (of one application only, when named), as a restart would."""
    conn = await asyncpg.connect(PG_SERVER)
    try:
        rows = await conn.fetch(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()"
            " AND ($2::text IS NULL OR application_name = $2) AND application_name <> 'firstlume-test-listener'",
            database,
            application_name,
        )
        return len(rows)
    finally:
        await conn.close()


def pg_pubsub_url(database: str) -> str:
    return _asyncpg_url(database).replace("postgresql://", "postgres://")


async def test_live_events_flow_again_after_postgresql_ends_the_event_connections(pg_database: str) -> None:
    listener, publisher = PubSub(pg_pubsub_url(pg_database)), PubSub(pg_pubsub_url(pg_database))
    await listener.connect()
    await publisher.connect()
    try:
        async with listener.subscribe("run_r1") as events:
            await publisher.publish("run_r1", LogAppended(run_id="r1", step="plan", offset=0, end=1))
            assert await events.next(seconds=10) == LogAppended(run_id="r1", step="plan", offset=0, end=1)

            assert await terminate(pg_database, application_name=APPLICATION_NAME) == 2

            after = LogAppended(run_id="r1", step="plan", offset=1, end=2)

            await publish_until_delivered(publisher, events, "run_r1", after)
    finally:
        await listener.disconnect()
        await publisher.disconnect()


async def test_live_events_flow_again_after_postgresql_refused_new_sessions_for_a_while(
    pg_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with limited_role(pg_database) as role:
        listener = PubSub(role.dsn.replace("postgresql://", "postgres://"))
        publisher = PubSub(pg_pubsub_url(pg_database))
        await listener.connect()
        await publisher.connect()
        try:
            async with listener.subscribe("run_r1") as events:
                # The listener's connection ends, and PostgreSQL refuses its next ones (53300).
                await role.refuse_new_sessions()
                await until(
                    lambda: "too many connections" in caplog.text, 30, "a reconnect refused by PostgreSQL"
                )
                await role.accept_sessions()
                after = LogAppended(run_id="r1", step="plan", offset=1, end=2)
                await publish_until_delivered(publisher, events, "run_r1", after)
        finally:
            await listener.disconnect()
            await publisher.disconnect()


async def test_events_sent_in_one_round_trip_arrive_in_order_on_each_of_their_channels(
    pg_database: str,
) -> None:
    """The outbox relay sends a pass's events with publish_many: one statement on PostgreSQL."""
    listener, publisher = PubSub(pg_pubsub_url(pg_database)), PubSub(pg_pubsub_url(pg_database))
    await listener.connect()
    await publisher.connect()
    events = [LogAppended(run_id="r1", step="plan", offset=i, end=i + 1) for i in range(50)]
    try:
        async with listener.subscribe("run_r1") as run, listener.subscribe("org_o1") as org:
            await publisher.publish_many([(channel, e) for e in events for channel in ("run_r1", "org_o1")])
            assert [await run.next(seconds=10) for _ in events] == events
            assert [await org.next(seconds=10) for _ in events] == events
            assert run.pending() == org.pending() == []
    finally:
        await listener.disconnect()
        await publisher.disconnect()
    with pytest.raises(PublishFailed):
        await publisher.publish_many([("run_r1", events[0])])


async def test_two_relays_publish_each_event_exactly_once(ctx: Context) -> None:
    from firstlume.db.engine import Database
    from firstlume.services import outbox
    from firstlume.services.outbox import OutboxRelay

    events = [LogAppended(run_id="r1", step="plan", offset=i, end=i + 1) for i in range(600)]
    async with ctx.unit() as unit:
        for event in events:
            await outbox.record(unit, event, ["run_r1"])
    # Two processes: each its own engine; they share one broker, which counts what arrives.
    relays = [OutboxRelay(Database(ctx.settings.database_url), ctx.pubsub, batch=50) for _ in range(2)]
    async with ctx.pubsub.subscribe("run_r1") as heard:
        published = await asyncio.gather(*(relay.publish_pending() for relay in relays))
        received = await exactly(heard, len(events))
    for relay in relays:
        await relay.db.dispose()
    assert sum(published) == len(events)
    assert sorted(received, key=lambda e: e.offset) == events  # type: ignore[union-attr]


async def test_a_burst_of_commits_is_published_in_few_passes_each_event_once_in_order(ctx: Context) -> None:
    # Passes are paced: commits in quick succession kick a relay that has just run, and their
    # events go out together in its next pass, not one pass (a transaction and a NOTIFY) each.
    from firstlume.services import outbox
    from firstlume.services.outbox import OutboxRelay

    class CountingRelay(OutboxRelay):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.batches: list[int] = []

        async def _pass(self) -> tuple[int, bool]:
            published, full = await super()._pass()
            if published:
                self.batches.append(published)
            return published, full

    assert ctx.relay is None  # this context has no relay of its own: the test's is the only one
    ctx.relay = relay = CountingRelay(ctx.db, ctx.pubsub, interval=30, pace=1.0)
    events = [LogAppended(run_id="r2", step="plan", offset=i, end=i + 1) for i in range(10)]
    async with ctx.pubsub.subscribe("run_r2") as heard:
        await relay.start()
        try:
            for event in events:
                async with ctx.unit() as unit:  # each commit kicks the relay
                    await outbox.record(unit, event, ["run_r2"])
            received = await exactly(heard, len(events))
        finally:
            await relay.stop()
    assert received == events
    assert sum(relay.batches) == len(events) and len(relay.batches) <= 2, relay.batches


async def test_a_units_events_are_published_together_in_order_once_it_commits(ctx: Context) -> None:
    """One publish for all of a unit's wake-ups (one round trip on PostgreSQL), not one each:
    the request's answer waits for them. Identical wake-ups go once."""
    sent: list[list[tuple[str, Event]]] = []
    real = ctx.pubsub.publish_many

    async def recorded(events: Sequence[tuple[str, Event]]) -> None:
        sent.append(list(events))
        await real(events)

    ctx.pubsub.publish_many = recorded  # type: ignore[method-assign]
    appended = [LogAppended(run_id="r1", step="plan", offset=i, end=i + 1) for i in range(3)]
    try:
        async with ctx.unit() as unit:
            for event in appended:
                unit.publish_after_commit("run_r1", event)
            unit.publish_after_commit("run_r1", appended[0])  # the same wake-up again
            unit.publish_after_commit("org_o1", appended[0])
            assert sent == []  # nothing before the commit
    finally:
        del ctx.pubsub.publish_many
    assert sent == [[("run_r1", e) for e in appended] + [("org_o1", appended[0])]]
