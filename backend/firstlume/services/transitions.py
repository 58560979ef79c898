"""The one helper through which every run status changes, and the one executor of what a change
of status does (domain/effects.py): compare-and-set, a history row, the effects, and the event,
all in the caller's transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Integer, Row, Table, bindparam, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from firstlume.db.append import append_rows
from firstlume.db.bulk import count_failed_resources, move_change_states
from firstlume.db.models import PhaseToken, Run, RunStatusChange, RunStep, Stack, new_id
from firstlume.db.types import utcnow
from firstlume.domain.effects import Effects, effects_of
from firstlume.domain.errors import NotFound, StackLocked, StatusChanged
from firstlume.domain.runs import FINISHED, HOLDS_LOCK, INITIAL, RunStatus, StepStatus, check_transition
from firstlume.protocol.events import ResourcesChanged, RunStatusChanged
from firstlume.pubsub import SCHEDULER_CHANNEL, org_runs_channel, run_channel
from firstlume.services import outbox
from firstlume.services.context import Unit
from firstlume.services.dependencies import outbox as dependency_outbox
from firstlume.services.git import feedback as git_feedback
from firstlume.services.notifications.enqueue import enqueue as enqueue_notification
from firstlume.services.steps import set_step

# A run records this many failed addresses (in plan order) beside their count.
MAX_FAILED_ADDRESSES = 100

_runs = cast(Table, Run.__table__)
_HISTORY = cast(Table, RunStatusChange.__table__)
# A new run takes the next number of its stack. The counter's update takes the stack's row lock
# (PostgreSQL) or comes after the write lock (SQLite): concurrent starts get consecutive numbers,
# which are the queue's arrival order, and each holds the lock until it commits.
_stacks = cast(Table, Stack.__table__)
_NEXT_NUMBER = (
    update(_stacks)
    # A deleted stack starts no run, whatever found it before it was deleted.
    .where(_stacks.c.id == bindparam("stack_id"), _stacks.c.deleted_at.is_(None))
    .values(run_counter=_stacks.c.run_counter + 1)
    .returning(_stacks.c.run_counter)
)


def _queue_position(number: Any, first_if_none_queued: Any) -> Any:
    """The position in its stack's queue of the run numbered `number`, as the statement reads it.

    Counting the queue would read every queued run of the stack while the stack's lock is held:
    with a few thousand queued, each start held it for milliseconds, and the starts of a stack
    took turns at that pace. Instead: every run enters the queue with the next number and leaves
    it only to start (always the stack's first queued run: services/dispatch.py) or to be
    canceled. So from the first queued number to the new run's, every run is still queued but
    those canceled in between: the position is that span less them, two index lookups and a
    count of the queue's holes, however long the queue."""
    queued, canceled = _runs.alias("queued_run"), _runs.alias("canceled_run")
    first = (
        select(func.coalesce(func.min(queued.c.number), first_if_none_queued).label("number"))
        .where(queued.c.stack_id == bindparam("stack_id"), queued.c.status == INITIAL)
        .subquery("first_queued")
    )
    holes = (
        select(func.count())
        .select_from(canceled)
        .where(
            canceled.c.stack_id == bindparam("stack_id"),
            canceled.c.status == RunStatus.CANCELED,
            canceled.c.number > first.c.number,
            canceled.c.number < number,
        )
        .correlate(first)
        .scalar_subquery()
    )
    return select(number - first.c.number + 1 - holes).scalar_subquery()


# A new run's first history row, which returns the run's position in its stack's queue: the run
# is already written, so the first queued run is never missing.
_run_number = bindparam("run_number", type_=Integer)
_FIRST_HISTORY_ROW = insert(_HISTORY).returning(_queue_position(_run_number, _run_number))


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
    effects = effects_of(current, target)
    if current is None:
        run.id = run.id or new_id()
        # Its first history row also counts the queue it joins (see _FIRST_HISTORY_ROW).
        unit.queue_positions[run.id] = await _insert(unit, run, target, now, values, history)
    else:
        await _compare_and_set(unit, run, current, target, now, values)
        await append_rows(unit.session, _HISTORY, {"run_id": run.id, **history})
    await _carry_out(unit, run, effects)
    if current is not None:
        await unit.session.flush()
        await unit.session.refresh(run)
    event, channels = _status_event(run.id, run.org_id, current, target, effects)
    await outbox.record(unit, event, channels, notification=effects.notification)
    if effects.notification is not None:
        await enqueue_notification(unit, run, effects.notification)
    if effects.triggers_dependents:
        await dependency_outbox.enqueue(unit, run)
    if run.proposed and (target in FINISHED or current is None):
        # A pull request's run: its commit status (and the PR's comment) follow it.
        await git_feedback.report(unit, run, target)
    return run


def _status_event(
    run_id: str, org_id: str, current: RunStatus | None, target: RunStatus, effects: Effects
) -> tuple[RunStatusChanged, list[str]]:
    """The outbox event of a run's status change, and its channels."""
    channels = [run_channel(run_id), org_runs_channel(org_id)]
    if effects.wakes_scheduler:
        channels.append(SCHEDULER_CHANNEL)
    return RunStatusChanged(run_id=run_id, org_id=org_id, status=target, from_status=current), channels


async def _insert(
    unit: Unit, run: Run, target: RunStatus, now: Any, values: dict[str, Any], history: dict[str, Any]
) -> int:
    """Numbers a new run, writes it and its first history row; returns its position in its
    stack's queue."""
    run.status = target
    run.created_at = run.created_at or now
    run.updated_at = now
    for name, value in values.items():
        setattr(run, name, value)
    session = unit.session
    number = (await session.execute(_NEXT_NUMBER, {"stack_id": run.stack_id})).scalar_one_or_none()
    if number is None:
        raise NotFound("The stack was deleted.")
    run.number = number
    session.add(run)
    await session.flush()
    counted = await session.execute(
        _FIRST_HISTORY_ROW,
        {**history, "run_id": run.id, "stack_id": run.stack_id, "run_number": run.number},
    )
    return int(counted.scalar_one())


async def _compare_and_set(
    unit: Unit, run: Run, current: RunStatus, target: RunStatus, now: Any, values: dict[str, Any]
) -> None:
    values = {"status": target, "updated_at": now, **values}
    if target in FINISHED:
        values["finished_at"] = now
    session = unit.session
    statement = (
        update(Run)
        .where(Run.id == run.id, Run.status == current)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    try:
        if target in HOLDS_LOCK and current not in HOLDS_LOCK:
            # Only a run taking its stack's lock can break the one-lock index: its refusal is
            # caught in a savepoint so the caller's transaction goes on. Any other move keeps
            # the two round trips of one (a plan's end, an apply's).
            async with session.begin_nested():
                result = await session.execute(statement)
        else:
            result = await session.execute(statement)
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
    await outbox.record_all(
        unit,
        [_status_event(row.id, row.org_id, current, target, effects) for row in moved],
        notification=effects.notification,
    )
    return moved
