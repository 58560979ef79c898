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

from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import fields
from typing import Any

import strawberry
from strawberry.types import Info

from firstlume import metrics
from firstlume.api.graphql.context import GraphQLContext
from firstlume.api.graphql.loaders import Loaders
from firstlume.api.graphql.types import LogChunk, ResourceChange, Run
from firstlume.domain.errors import InvalidRequest, NotFound
from firstlume.domain.runs import FINISHED
from firstlume.protocol.events import (
    ChangesStored,
    ResourcesChanged,
    RunStatusChanged,
    RunUpdated,
    StepChanged,
)
from firstlume.pubsub import CLOSED, run_channel
from firstlume.services import accounts
from firstlume.services.context import Context
from firstlume.services.logs import SAFETY_POLL_SECONDS
from firstlume.services.reads import changes as change_reads
from firstlume.services.reads import runs as run_reads
from firstlume.services.reads.catalog import OrganizationRecord
from firstlume.services.reads.changes import ChangeRecord
from firstlume.services.reads.runs import RunRecord

Ctx = Info[GraphQLContext, None]


async def run_of_org(info: Ctx, org: str, run_id: str) -> RunRecord:
    actor = info.context.require_actor()
    async with info.context.app.db.read() as session:
        org_row = await accounts.org_for(session, actor, org)
        run = await run_reads.run_in_org(session, org_row.id, run_id)
    if run is None:
        raise NotFound(f"No run '{run_id}' in this organization.")
    return run


def _finished(status: Any) -> bool:
    return isinstance(status, str) and status in {s.value for s in FINISHED}


# Runs -----------------------------------------------------------------------------------------

# What changes a run for its viewers (its log has its own view).
RUN_EVENTS = (RunStatusChanged, StepChanged, RunUpdated, ChangesStored)
# What changes a run's resources: a status change can touch every change at once (approval: all
# pending), as can storing the plan's changes.
RESOURCE_EVENTS = (ResourcesChanged, ChangesStored, RunStatusChanged)
# What moves without the run changing for its viewers (the log has its own view).
UNSHOWN_RUN_FIELDS = ("log_length",)
SHOWN_RUN_FIELDS = tuple(f.name for f in fields(RunRecord) if f.name not in UNSHOWN_RUN_FIELDS)


async def _run_snapshot(ctx: Context, run_id: str, loaders: Loaders) -> tuple[RunRecord, tuple[Any, ...]]:
    """The run row and its steps (primed into the loaders), and a fingerprint of both."""
    async with ctx.db.read() as session:
        found = await run_reads.run_with_steps(session, run_id)
    assert found is not None
    row, steps = found
    loaders.steps.prime(run_id, steps)
    fingerprint = (
        tuple(getattr(row, name) for name in SHOWN_RUN_FIELDS),
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
                if event is None or isinstance(event, RUN_EVENTS):
                    break
            if any(e is CLOSED for e in events.pending()):
                return


# Resources ------------------------------------------------------------------------------------


def _resource_fingerprint(record: ChangeRecord) -> Any:
    return (record.state, record.error, record.stages_json)


async def _changes(
    ctx: Context, run_id: str, addresses: Sequence[str] | None
) -> tuple[list[ChangeRecord], str]:
    async with ctx.db.read() as session:
        records = await change_reads.changes_at(session, run_id, addresses)
        status = await run_reads.run_status(session, run_id)
    return records, str(status)


async def follow_resources(ctx: Context, run_id: str) -> AsyncIterator[list[ResourceChange]]:
    async with ctx.pubsub.subscribe(run_channel(run_id)) as events:
        sent: dict[str, Any] = {}

        def news(records: list[ChangeRecord]) -> list[ResourceChange]:
            changed = [r for r in records if sent.get(r.address) != _resource_fingerprint(r)]
            sent.update({r.address: _resource_fingerprint(r) for r in changed})
            return [ResourceChange.of(r) for r in changed]

        records, status = await _changes(ctx, run_id, None)
        yield news(records)
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
                elif isinstance(item, RESOURCE_EVENTS):
                    addresses = None
            if event is None:
                async with ctx.db.read() as session:
                    status = str(await run_reads.run_status(session, run_id))
                if _finished(status):
                    addresses = None
            if addresses is not None and not addresses:
                continue
            records, status = await _changes(
                ctx, run_id, sorted(addresses) if addresses is not None else None
            )
            if _finished(status) and addresses is not None:
                # The run ended while these events were read: other resources' last states may
                # be in events not read yet, and the loop ends here, so read them all once more.
                records, status = await _changes(ctx, run_id, None)
            if changed := news(records):
                yield changed


# Active runs ----------------------------------------------------------------------------------


async def follow_active_runs(ctx: Context, org: OrganizationRecord) -> AsyncIterator[list[Run]]:
    """The organization's feed (services/active_runs.py), shared by this process's followers; the
    fields beside each run are this follower's own reads, forgotten for the runs that changed."""
    loaders = Loaders(ctx)
    async for active in ctx.active_runs.follow(org.id):
        if active.changed is None:
            loaders = Loaders(ctx)
        else:
            for run_id in active.changed:
                loaders.forget_run(run_id)
            loaders.forget_volatile()
        yield [Run(row=r, loaders=loaders) for r in active.runs]


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
        with metrics.active_subscription("runLog"):
            async for part in info.context.app.log_tails.follow(run.id, step, from_offset):
                yield LogChunk.of(part)

    @strawberry.subscription(
        description="The run now, then again whenever its status, steps, commit, configuration or summary "
        "change; completes once the run has finished."
    )
    async def run_updated(self, info: Ctx, org: str, run_id: strawberry.ID) -> AsyncGenerator[Run, None]:
        run = await run_of_org(info, org, str(run_id))
        with metrics.active_subscription("runUpdated"):
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
        with metrics.active_subscription("resourceStates"):
            async for changed in follow_resources(info.context.app, run.id):
                yield changed

    @strawberry.subscription(
        description="Every run of the organization that has not finished, oldest first: now, then after "
        "each change. Runs awaiting approval have `awaitingApproval` set."
    )
    async def active_runs(self, info: Ctx, org: str) -> AsyncGenerator[list[Run], None]:
        actor = info.context.require_actor()
        async with info.context.app.db.read() as session:
            org_row = await accounts.org_for(session, actor, org)
        with metrics.active_subscription("activeRuns"):
            async for items in follow_active_runs(info.context.app, org_row):
                yield items
