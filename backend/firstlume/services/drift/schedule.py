"""Queues the drift runs of due cron slots, exactly once across replicas.

The database decides: a replica takes a slot by inserting the (stack, slot) row, which is
unique; a second replica's insert of the same slot does nothing, and it moves on. The slot's row
and its run commit in one transaction, so a slot is never taken without its run, nor a run
queued twice. A stack whose drift run is still waiting (or running) gets no second one: the slot
is recorded as skipped.

Missed slots are not caught up: only the latest due slot counts, and only while it is at most
GRACE old (a control plane that was down for an hour queues one run, not sixty).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from croniter import croniter
from sqlalchemy import delete, select, update
from sqlalchemy.dialects import postgresql, sqlite

from firstlume.db.models import Folder, Organization, Run, Stack
from firstlume.db.models_drift import DriftSlot
from firstlume.domain.runs import ACTIVE, RunType, TriggerKind
from firstlume.services.commands import StartRun
from firstlume.services.context import Context
from firstlume.services.reads.catalog import STACK_COLUMNS, StackRecord
from firstlume.services.reads.rows import column_rows
from firstlume.services.reads.settings import effective_settings
from firstlume.services.runs import Trigger, start_run

GRACE = timedelta(minutes=10)
# Slot rows only guard against a second queueing; older ones are deleted.
SLOT_RETENTION = timedelta(days=2)
SCHEDULE_ACTOR = "schedule"


@dataclass(frozen=True)
class Due:
    stack_id: str
    schedule: str
    slot: datetime


def latest_slot(schedule: str, now: datetime) -> datetime:
    """The latest time at or before `now` that `schedule` (five fields, UTC) names."""
    # croniter's get_prev excludes its start: start just after `now`, to the whole second.
    start = now.replace(microsecond=0) + timedelta(seconds=1)
    return croniter(schedule, start).get_prev(datetime)


async def due_slots(ctx: Context, now: datetime) -> list[Due]:
    """Each stack whose effective drift schedule has a slot due now (within GRACE)."""
    async with ctx.db.read() as session:
        # Only organizations where some level sets a schedule: most have none.
        org_ids = set(
            await session.scalars(select(Organization.id).where(Organization.drift_schedule.is_not(None)))
        )
        org_ids |= set(await session.scalars(select(Folder.org_id).where(Folder.drift_schedule.is_not(None))))
        org_ids |= set(
            await session.scalars(
                select(Stack.org_id).where(Stack.drift_schedule.is_not(None), Stack.deleted_at.is_(None))
            )
        )
        if not org_ids:
            return []
        rows = await column_rows(
            session,
            select(*STACK_COLUMNS)
            .where(Stack.org_id.in_(org_ids), Stack.deleted_at.is_(None))
            .order_by(Stack.id),
        )
        stacks = [StackRecord(*row) for row in rows]
        resolved = await effective_settings(session, stacks)
    due = []
    for stack, settings in zip(stacks, resolved, strict=True):
        schedule = settings["drift_schedule"].value
        if not schedule:
            continue
        slot = latest_slot(schedule, now)
        if now - slot <= GRACE:
            due.append(Due(stack.id, schedule, slot))
    return due


async def take_slot(ctx: Context, due: Due) -> str | None:
    """Takes the slot and queues its drift run; returns the run's id, or None when another
    replica took the slot or a drift run of the stack is still waiting."""
    dialect = sqlite if ctx.db.is_sqlite else postgresql
    async with ctx.unit() as unit:
        session = unit.session
        slot_id = await session.scalar(
            dialect.insert(DriftSlot)
            .values(stack_id=due.stack_id, slot_at=due.slot, schedule=due.schedule)
            .on_conflict_do_nothing(index_elements=["stack_id", "slot_at"])
            .returning(DriftSlot.id)
        )
        if slot_id is None:
            return None
        waiting = await session.scalar(
            select(Run.id)
            .where(Run.stack_id == due.stack_id, Run.type == RunType.DRIFT, Run.status.in_(ACTIVE))
            .limit(1)
        )
        if waiting is not None:
            return None
        stack = await session.get(Stack, due.stack_id)
        if stack is None:
            return None
        run = await start_run(
            unit,
            None,
            stack,
            StartRun(type=RunType.DRIFT),
            trigger=Trigger(kind=TriggerKind.SCHEDULE, by=SCHEDULE_ACTOR),
        )
        await session.execute(update(DriftSlot).where(DriftSlot.id == slot_id).values(run_id=run.id))
        return run.id


async def queue_due_runs(ctx: Context, now: datetime) -> list[str]:
    """One pass: the drift runs queued by this replica for the slots due at `now`."""
    queued = []
    for due in await due_slots(ctx, now):
        run_id = await take_slot(ctx, due)
        if run_id is not None:
            queued.append(run_id)
    return queued


async def forget_old_slots(ctx: Context, now: datetime) -> None:
    async with ctx.db.transaction() as session:
        await session.execute(delete(DriftSlot).where(DriftSlot.slot_at < now - SLOT_RETENTION))


__all__ = ["Due", "forget_old_slots", "latest_slot", "queue_due_runs", "take_slot"]
