"""The one helper through which every run status changes: compare-and-set plus a history row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Row, Table, insert, select, update
from sqlalchemy.exc import IntegrityError

from firstlume.db.models import Run, RunStatusChange
from firstlume.db.types import utcnow
from firstlume.domain.errors import StackLocked, StatusChanged
from firstlume.domain.runs import FINISHED, HOLDS_LOCK, RunStatus, check_transition
from firstlume.pubsub import SCHEDULER_CHANNEL, org_runs_channel, run_channel
from firstlume.services.context import Unit

# The scheduler has work at once when an apply is approved, or when a run ends and frees its
# stack for the next queued run; otherwise it would find out at its next tick.
WAKES_SCHEDULER = FINISHED | {RunStatus.APPLY_QUEUED}


async def change_status(
    unit: Unit,
    run: Run,
    target: RunStatus,
    *,
    actor: str | None = None,
    reason: str | None = None,
    **values: Any,
) -> Run:
    """Moves `run` from the status it was read with to `target`, or raises.

    The UPDATE only matches while the row still has the status we read, so two processes that
    read the same run cannot both move it (the loser gets StatusChanged). Entering a status that
    holds the stack's lock may hit the database's one-lock-per-stack index: StackLocked.
    """
    current = RunStatus(run.status)
    check_transition(current, target)
    now = utcnow()
    values = {"status": target.value, "updated_at": now, **values}
    if target in FINISHED:
        values["finished_at"] = now
    session = unit.session
    try:
        async with session.begin_nested():
            result = await session.execute(
                update(Run)
                .where(Run.id == run.id, Run.status == current.value)
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
    session.add(
        RunStatusChange(
            run_id=run.id,
            from_status=current.value,
            to_status=target.value,
            at=now,
            actor=actor,
            reason=reason,
        )
    )
    await session.flush()
    await session.refresh(run)
    event = {"type": "status", "run_id": run.id, "status": target.value, "from": current.value}
    unit.publish_after_commit(run_channel(run.id), event)
    unit.publish_after_commit(org_runs_channel(run.org_id), event)
    if target in WAKES_SCHEDULER:
        unit.publish_after_commit(SCHEDULER_CHANNEL, event)
    return run


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
    """`change_status` for many runs read in `current`, in one UPDATE and one history INSERT.

    Returns the rows that moved (id, org_id, stack_id, phase_attempt after the update); a run
    that is no longer in `current` is left as it is. Values may be SQL expressions
    (`phase_attempt=Run.phase_attempt + 1`). If entering `target` would give a stack a second
    lock holder, nothing moves and StackLocked is raised, as for one run."""
    check_transition(current, target)
    if not run_ids:
        return []
    now = utcnow()
    values = {"status": target.value, "updated_at": now, **values}
    if target in FINISHED:
        values["finished_at"] = now
    session = unit.session
    try:
        async with session.begin_nested():
            moved = list(
                await session.execute(
                    update(Run)
                    .where(Run.id.in_(run_ids), Run.status == current.value)
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
    await session.execute(
        insert(cast(Table, RunStatusChange.__table__)),
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
    for row in moved:
        event = {"type": "status", "run_id": row.id, "status": target.value, "from": current.value}
        unit.publish_after_commit(run_channel(row.id), event)
        unit.publish_after_commit(org_runs_channel(row.org_id), event)
        if target in WAKES_SCHEDULER:
            unit.publish_after_commit(SCHEDULER_CHANNEL, event)
    return moved
