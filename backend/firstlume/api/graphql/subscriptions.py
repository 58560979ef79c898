"""Live views: a run's log, its status and steps, its resources during the apply, and the
organization's active runs.

Every subscription subscribes to its pub/sub channel first, then reads what is stored, then
reads again on each event: whatever is written between the first read and the subscription is
covered by an event, and offsets (for logs) or what was last sent (for runs and resources) drop
the overlap, so nothing is missed or sent twice. Events carry ids and offsets only; each event
costs a subscriber one small read of what changed. Events from every control-plane process
arrive through the broadcaster (PostgreSQL LISTEN/NOTIFY in production).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from typing import Any

import strawberry
from sqlalchemy import select
from strawberry.types import Info

from firstlume.api.graphql.context import GraphQLContext
from firstlume.api.graphql.loaders import ACTIVE_VALUES, Loaders
from firstlume.api.graphql.types import LogChunk, ResourceChange, Run, runs_with_positions
from firstlume.db import models
from firstlume.domain.errors import InvalidRequest
from firstlume.domain.runs import FINISHED
from firstlume.protocol.events import ResourcesChanged, RunStatusChanged
from firstlume.pubsub import CLOSED, org_runs_channel, run_channel
from firstlume.services import accounts, runs
from firstlume.services.context import Context
from firstlume.services.logs import SAFETY_POLL_SECONDS, LogTail, follow_log

Ctx = Info[GraphQLContext, None]


async def run_of_org(info: Ctx, org: str, run_id: str) -> models.Run:
    actor = info.context.require_actor()
    async with info.context.app.db.transaction() as session:
        org_row = await accounts.org_for(session, actor, org)
        return await runs.run_in_org(session, org_row, run_id)


def _finished(status: Any) -> bool:
    return isinstance(status, str) and status in {s.value for s in FINISHED}


# Logs -----------------------------------------------------------------------------------------


# Runs -----------------------------------------------------------------------------------------

RUN_EVENTS = ("status", "step", "run", "changes")
# Bookkeeping that moves without the run changing for its viewers (the log has its own view).
UNSHOWN_RUN_COLUMNS = ("heartbeat_at", "phase_attempt", "log_length")


async def _run_snapshot(ctx: Context, run_id: str, loaders: Loaders) -> tuple[models.Run, tuple[Any, ...]]:
    """The run row and its steps (primed into the loaders), and a fingerprint of both."""
    async with ctx.db.transaction() as session:
        row = await session.get(models.Run, run_id)
        assert row is not None
        steps = list(
            await session.scalars(
                select(models.RunStep)
                .where(models.RunStep.run_id == run_id)
                .order_by(models.RunStep.position)
            )
        )
    loaders.steps.prime(run_id, steps)
    fingerprint = (
        tuple(getattr(row, c.key) for c in models.Run.__table__.columns if c.key not in UNSHOWN_RUN_COLUMNS),
        tuple((s.name, s.status, s.started_at, s.finished_at) for s in steps),
    )
    return row, _hashable(fingerprint)


def _hashable(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


async def follow_run(ctx: Context, run_id: str) -> AsyncIterator[Run]:
    async with ctx.pubsub.subscribe(run_channel(run_id)) as events:
        last = None
        while True:
            loaders = Loaders(ctx)
            row, fingerprint = await _run_snapshot(ctx, run_id, loaders)
            if fingerprint != last:
                last = fingerprint
                yield Run(row=row, loaders=loaders)
            if _finished(row.status):
                return
            while True:
                event = await events.next(SAFETY_POLL_SECONDS)
                if event is CLOSED:
                    return
                if event is None or event.type in RUN_EVENTS:
                    break
            if any(e is CLOSED for e in events.pending()):
                return


# Resources ------------------------------------------------------------------------------------


def _resource_fingerprint(row: models.ResourceChange) -> Any:
    return _hashable((row.state, row.error, row.stages))


async def _changes(
    ctx: Context, run_id: str, addresses: Iterable[str] | None
) -> tuple[list[models.ResourceChange], str]:
    async with ctx.db.transaction() as session:
        query = select(models.ResourceChange).where(models.ResourceChange.run_id == run_id)
        if addresses is not None:
            query = query.where(models.ResourceChange.address.in_(list(addresses)))
        rows = list(await session.scalars(query.order_by(models.ResourceChange.position)))
        status = await session.scalar(select(models.Run.status).where(models.Run.id == run_id))
    return rows, str(status)


async def follow_resources(ctx: Context, run_id: str) -> AsyncIterator[list[ResourceChange]]:
    async with ctx.pubsub.subscribe(run_channel(run_id)) as events:
        sent: dict[str, Any] = {}

        def news(rows: list[models.ResourceChange]) -> list[ResourceChange]:
            changed = [r for r in rows if sent.get(r.address) != _resource_fingerprint(r)]
            sent.update({r.address: _resource_fingerprint(r) for r in changed})
            return [ResourceChange(row=r) for r in changed]

        rows, status = await _changes(ctx, run_id, None)
        yield news(rows)
        while not _finished(status):
            event = await events.next(SAFETY_POLL_SECONDS)
            batch = [] if event is None else [event, *events.pending()]
            if any(e is CLOSED for e in batch):
                return
            addresses: set[str] | None = set()
            for item in batch:
                if isinstance(item, ResourcesChanged) and item.addresses is not None:
                    if addresses is not None:
                        addresses.update(item.addresses)
                elif item.type in ("resources", "changes", "status"):
                    # A status change can touch every change at once (approval: all pending).
                    addresses = None
            if event is None:
                async with ctx.db.transaction() as session:
                    status = str(
                        await session.scalar(select(models.Run.status).where(models.Run.id == run_id))
                    )
                if _finished(status):
                    addresses = None
            if addresses is not None and not addresses:
                continue
            rows, status = await _changes(ctx, run_id, addresses)
            if _finished(status) and addresses is not None:
                # The run ended while these events were read: other resources' last states may
                # be in events not read yet, and the loop ends here, so read them all once more.
                rows, status = await _changes(ctx, run_id, None)
            if changed := news(rows):
                yield changed


# Active runs ----------------------------------------------------------------------------------


def _ordered(rows: dict[str, models.Run]) -> list[models.Run]:
    return sorted(rows.values(), key=lambda r: (r.created_at, r.number))


def _fingerprint_list(rows: dict[str, models.Run]) -> Any:
    return tuple(sorted((r.id, r.status, r.updated_at) for r in rows.values()))


async def follow_active_runs(ctx: Context, org: models.Organization) -> AsyncIterator[list[Run]]:
    async with ctx.pubsub.subscribe(org_runs_channel(org.id)) as events:
        loaders = Loaders(ctx)
        async with ctx.db.transaction() as session:
            active = {r.id: r for r in await runs.list_active_runs(session, org)}
        yield runs_with_positions(_ordered(active), loaders)
        while True:
            event = await events.next(SAFETY_POLL_SECONDS)
            if event is None:
                async with ctx.db.transaction() as session:
                    fresh = {r.id: r for r in await runs.list_active_runs(session, org)}
                if _fingerprint_list(fresh) == _fingerprint_list(active):
                    continue
                changed_ids = set(fresh) | set(active)
                active = fresh
            else:
                batch = [event, *events.pending()]
                if any(e is CLOSED for e in batch):
                    return
                changed_ids = {e.run_id for e in batch if isinstance(e, RunStatusChanged)}
                if not changed_ids:
                    continue
                async with ctx.db.transaction() as session:
                    rows = await session.scalars(
                        select(models.Run).where(models.Run.id.in_(changed_ids), models.Run.org_id == org.id)
                    )
                    changed = {r.id: r for r in rows}
                for run_id in changed_ids:
                    row = changed.get(run_id)
                    if row is not None and row.status in ACTIVE_VALUES:
                        active[run_id] = row
                    else:
                        active.pop(run_id, None)
            for run_id in changed_ids:
                loaders.forget_run(run_id)
            loaders.forget_volatile()
            yield runs_with_positions(_ordered(active), loaders)


# The schema's root ----------------------------------------------------------------------------


@strawberry.type
class Subscription:
    @strawberry.subscription(
        description="The run's log (or one step's) from `fromOffset`, live, until the run (or step) ends. "
        "Each message carries `nextOffset`: a client that reconnects with it misses and repeats nothing."
    )
    async def run_log(
        self, info: Ctx, org: str, run_id: strawberry.ID, step: str | None = None, from_offset: int = 0
    ) -> AsyncGenerator[LogChunk, None]:
        if from_offset < 0:
            raise InvalidRequest("'fromOffset' must not be negative.", field="fromOffset")
        run = await run_of_org(info, org, str(run_id))
        ctx = info.context.app
        async for part in follow_log(ctx, LogTail(ctx, run.id, step, from_offset)):
            yield LogChunk(text=part.text, next_offset=part.next_offset)

    @strawberry.subscription(
        description="The run now, then again whenever its status, steps, commit, configuration or summary "
        "change; completes once the run has finished."
    )
    async def run_updated(self, info: Ctx, org: str, run_id: strawberry.ID) -> AsyncGenerator[Run, None]:
        run = await run_of_org(info, org, str(run_id))
        async for item in follow_run(info.context.app, run.id):
            yield item

    @strawberry.subscription(
        description="Every planned change with its state, then each change whose state (or error, or stages) "
        "moved, in the order the states were recorded; completes once the run has finished."
    )
    async def resource_states(
        self, info: Ctx, org: str, run_id: strawberry.ID
    ) -> AsyncGenerator[list[ResourceChange], None]:
        run = await run_of_org(info, org, str(run_id))
        async for changed in follow_resources(info.context.app, run.id):
            yield changed

    @strawberry.subscription(
        description="Every run of the organization that has not finished, oldest first: now, then after "
        "each change. Runs awaiting approval have `awaitingApproval` set."
    )
    async def active_runs(self, info: Ctx, org: str) -> AsyncGenerator[list[Run], None]:
        actor = info.context.require_actor()
        async with info.context.app.db.transaction() as session:
            org_row = await accounts.org_for(session, actor, org)
        async for items in follow_active_runs(info.context.app, org_row):
            yield items
