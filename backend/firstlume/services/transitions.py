"""The one helper through which every run status changes, and the one executor of what a change
of status does (domain/effects.py): compare-and-set, a history row, the effects, and the event,
all in the caller's transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Row, Table, bindparam, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from firstlume.db.append import adopt, append_rows, insert_into, new_row
from firstlume.db.bulk import count_failed_resources, move_change_states
from firstlume.db.models import PhaseToken, Run, RunStatusChange, RunStep
from firstlume.db.types import utcnow
from firstlume.domain.effects import Effects, effects_of
from firstlume.domain.errors import StackLocked, StatusChanged
from firstlume.domain.runs import FINISHED, HOLDS_LOCK, INITIAL, RunStatus, StepStatus, check_transition
from firstlume.protocol.events import ResourcesChanged, RunStatusChanged
from firstlume.pubsub import SCHEDULER_CHANNEL, org_runs_channel, run_channel
from firstlume.services import outbox
from firstlume.services.context import Unit
from firstlume.services.notifications.enqueue import enqueue as enqueue_notification
from firstlume.services.steps import set_step

# A run records this many failed addresses (in plan order) beside their count.
MAX_FAILED_ADDRESSES = 100

_runs = cast(Table, Run.__table__)
_HISTORY = cast(Table, RunStatusChange.__table__)
# A new run's first history row, which also returns the run's position in its stack's queue: the
# queued runs of the stack, itself included. Exact, not a guess: the run's number was taken under
# the stack's row lock (services/runs.py), so every earlier start has committed, and no later one
# can have, by the time this statement reads. One round trip fewer for every start.
_QUEUED_IN_STACK = (
    select(func.count())
    .select_from(_runs)
    .where(_runs.c.stack_id == bindparam("stack_id"), _runs.c.status == INITIAL)
    .scalar_subquery()
)
_FIRST_HISTORY_ROW = insert(_HISTORY).returning(_QUEUED_IN_STACK)
# PostgreSQL: the run's own row goes in the same statement, as a data-modifying CTE (one more
# round trip fewer; SQLite has no INSERT in a WITH). The statement reads one snapshot, taken
# after the stack's row lock: the count sees every earlier start but not the row this
# statement inserts, hence the + 1. Its binds are the run's columns, prefixed.
_NEW_RUN = "new_run_"
_NEW_RUN_AND_FIRST_HISTORY_ROW = (
    insert(_HISTORY)
    .add_cte(
        insert(_runs)
        .values({column.key: bindparam(_NEW_RUN + column.key, type_=column.type) for column in _runs.c})
        .cte("new_run")
    )
    .returning(_QUEUED_IN_STACK + 1)
)


async def change_status(
    unit: Unit,
    run: Run,
    target: RunStatus,
    *,
    actor: str | None = None,
    reason: str | None = None,
    **values: Any,
) -> Run:
    """Moves `run` from the status it was read with to `target` and carries out the arrow's
    effects, or raises. A new run (not yet added, status None) enters its first status here.

    The UPDATE only matches while the row still has the status we read, so two processes that
    read the same run cannot both move it (the loser gets StatusChanged). Entering a status that
    holds the stack's lock may hit the database's one-lock-per-stack index: StackLocked.
    """
    current = None if run.status is None else RunStatus(run.status)
    check_transition(current, target)
    now = utcnow()
    history = {"from_status": current, "to_status": target, "at": now, "actor": actor, "reason": reason}
    if current is None:
        # Its first history row also counts the queue it joins (see _FIRST_HISTORY_ROW).
        unit.queue_positions[run.id] = await _insert(unit, run, target, now, values, history)
    else:
        await _compare_and_set(unit, run, current, target, now, values)
        await append_rows(unit.session, _HISTORY, {"run_id": run.id, **history})
    effects = effects_of(current, target)
    await _carry_out(unit, run, effects)
    if current is not None:
        await unit.session.flush()
        await unit.session.refresh(run)
    channels = [run_channel(run.id), org_runs_channel(run.org_id)]
    if effects.wakes_scheduler:
        channels.append(SCHEDULER_CHANNEL)
    outbox.record(
        unit,
        RunStatusChanged(run_id=run.id, org_id=run.org_id, status=target, from_status=current),
        channels,
        notification=effects.notification,
    )
    if effects.notification is not None:
        await enqueue_notification(unit, run, effects.notification)
    return run


async def _insert(
    unit: Unit, run: Run, target: RunStatus, now: Any, values: dict[str, Any], history: dict[str, Any]
) -> int:
    """Writes a new run and its first history row; returns its position in its stack's queue."""
    run.status = target
    run.created_at = run.created_at or now
    run.updated_at = now
    for name, value in values.items():
        setattr(run, name, value)
    session = unit.session
    if session.new:  # what the row may refer to goes first
        await session.flush()
    row = new_row(run)
    known = {**history, "run_id": row["id"], "stack_id": run.stack_id}
    connection = await session.connection()
    if connection.dialect.name == "sqlite":
        await connection.execute(insert_into(_runs), row)
        counted = await connection.execute(_FIRST_HISTORY_ROW, known)
    else:
        parameters = {_NEW_RUN + key: value for key, value in row.items()}
        counted = await connection.execute(_NEW_RUN_AND_FIRST_HISTORY_ROW, {**parameters, **known})
    adopt(session, run, row)
    return int(counted.scalar_one())


async def _compare_and_set(
    unit: Unit, run: Run, current: RunStatus, target: RunStatus, now: Any, values: dict[str, Any]
) -> None:
    values = {"status": target, "updated_at": now, **values}
    if target in FINISHED:
        values["finished_at"] = now
    session = unit.session
    try:
        async with session.begin_nested():
            result = await session.execute(
                update(Run)
                .where(Run.id == run.id, Run.status == current)
                .values(**values)
                .execution_options(synchronize_session=False)
            )
    except IntegrityError:
        if target in HOLDS_LOCK:
            raise StackLocked("Another run holds this stack's lock.") from None
        raise
    if result.rowcount != 1:  # type: ignore[attr-defined]
        fresh = await session.scalar(select(Run.status).where(Run.id == run.id))
        raise StatusChanged(
            f"The run is now {fresh}, not {current}; nothing was changed.", current=str(fresh)
        )


async def _carry_out(unit: Unit, run: Run, effects: Effects) -> None:
    session = unit.session
    if effects.revoke_phase_tokens:
        await session.execute(
            update(PhaseToken)
            .where(PhaseToken.run_id == run.id, PhaseToken.revoked_at.is_(None))
            .values(revoked_at=utcnow())
        )
    if effects.fail_running_steps:
        running = await session.scalars(
            select(RunStep.name).where(RunStep.run_id == run.id, RunStep.status == StepStatus.RUNNING)
        )
        for name in list(running):
            await set_step(unit, run, name, StepStatus.FAILED)
    for name, status in effects.steps:
        await set_step(unit, run, name, status)
    moved = 0
    for changes in (effects.interrupted_changes, effects.changes):
        if changes is not None:
            moved += await move_change_states(
                session,
                run.id,
                changes.to,
                only_from=changes.only_from,
                only_once_started=changes.only_once_started,
            )
    if moved:
        unit.publish_after_commit(run_channel(run.id), ResourcesChanged(run_id=run.id))
    if effects.record_failed_resources:
        count, addresses = await count_failed_resources(session, run.id, first=MAX_FAILED_ADDRESSES)
        run.failed_resource_count = count
        run.failed_resource_addresses = addresses


async def change_status_many(
    unit: Unit,
    run_ids: Sequence[str],
    current: RunStatus,
    target: RunStatus,
    *,
    actor: str | None = None,
    reason: str | None = None,
    **values: Any,
) -> list[Row[str, str, str, int]]:
    """`change_status` for many runs read in `current`, in one UPDATE and one history INSERT: the
    scheduler's claims. Only for arrows whose effects are the status change itself (no steps,
    change states or tokens to touch per run), which the effects table is asked for.

    Returns the rows that moved (id, org_id, stack_id, phase_attempt after the update); a run
    that is no longer in `current` is left as it is. Values may be SQL expressions
    (`phase_attempt=Run.phase_attempt + 1`). If entering `target` would give a stack a second
    lock holder, nothing moves and StackLocked is raised, as for one run."""
    check_transition(current, target)
    effects = effects_of(current, target)
    if (
        effects.steps
        or effects.fail_running_steps
        or effects.changes
        or effects.interrupted_changes
        or effects.revoke_phase_tokens
    ):
        raise ValueError(f"{current} → {target} has per-run effects: use change_status")
    if not run_ids:
        return []
    now = utcnow()
    values = {"status": target, "updated_at": now, **values}
    if target in FINISHED:
        values["finished_at"] = now
    session = unit.session
    try:
        async with session.begin_nested():
            moved = list(
                await session.execute(
                    update(Run)
                    .where(Run.id.in_(run_ids), Run.status == current)
                    .values(**values)
                    .returning(Run.id, Run.org_id, Run.stack_id, Run.phase_attempt)
                    .execution_options(synchronize_session=False)
                )
            )
    except IntegrityError:
        if target in HOLDS_LOCK:
            raise StackLocked("Another run holds this stack's lock.") from None
        raise
    if not moved:
        return []
    await append_rows(
        session,
        _HISTORY,
        [
            {
                "run_id": row.id,
                "from_status": current.value,
                "to_status": target.value,
                "at": now,
                "actor": actor,
                "reason": reason,
            }
            for row in moved
        ],
    )
    if effects.notification is not None:
        for run in await session.scalars(select(Run).where(Run.id.in_([row.id for row in moved]))):
            await enqueue_notification(unit, run, effects.notification)
    for row in moved:
        channels = [run_channel(row.id), org_runs_channel(row.org_id)]
        if effects.wakes_scheduler:
            channels.append(SCHEDULER_CHANNEL)
        outbox.record(
            unit,
            RunStatusChanged(run_id=row.id, org_id=row.org_id, status=target, from_status=current),
            channels,
            notification=effects.notification,
        )
    return moved
