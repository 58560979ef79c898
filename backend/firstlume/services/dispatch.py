"""Claiming work for executors: which phases start next, and failing phases whose executor is gone.

Several control-plane processes may run this at once against one PostgreSQL database. A claim
takes a batch in one transaction: one SELECT picks the candidate runs and locks them with
FOR UPDATE SKIP LOCKED, so a second scheduler skips them and takes the next ones instead of
waiting or fighting over the same oldest runs; one UPDATE moves them (compare-and-set on their
status); the one-lock-per-stack index stays the last guard. SQLite has no row locks: its
transactions begin IMMEDIATE and so take turns, which keeps one process (or a few) safe.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Integer, Select, Table, and_, bindparam, exists, func, insert, or_, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import aliased

from firstlume.crypto import hash_token, new_token
from firstlume.db.models import Organization, PhaseToken, Run, Stack, StateHead
from firstlume.db.types import utcnow
from firstlume.domain.claims import APPLIES
from firstlume.domain.errors import StackLocked, StatusChanged, StorageUnavailable
from firstlume.domain.runs import HOLDS_LOCK, PHASE_OF_RUNNING_STATUS, RUNNING, RunStatus, is_running_phase
from firstlume.launchers.base import ExecutorDied, PhaseLaunch, PhaseRef
from firstlume.services.context import Context, Unit
from firstlume.services.execution import fail_run
from firstlume.services.reads.state import held_by_person
from firstlume.services.transitions import change_status_many

LOCK_VALUES = [s.value for s in HOLDS_LOCK]

# Runs claimed per transaction: large enough that a full queue drains in a few round trips,
# small enough that a second scheduler finds work left and a batch's locks are held briefly.
CLAIM_BATCH = 200


# A person holds a state lock of the run's stack: its plan or apply would fail on the lock at once,
# so it waits in its status (domain/runs.py WAITS_FOR_STATE_LOCK) and is claimed once released.
_PERSON_LOCK = exists().where(StateHead.stack_id == Run.stack_id, held_by_person())
_NO_PERSON_LOCK = ~_PERSON_LOCK


def _startable_plans() -> Select[str]:
    """The first queued run of every stack that no run currently locks, oldest first, and every
    queued proposed run: a pull request's plan neither waits in the stack's queue nor for its
    lock (nor for a person's state lock: it takes none)."""
    queued = aliased(Run)
    holder = aliased(Run)
    first_number = (
        select(func.min(queued.number))
        .where(queued.stack_id == Run.stack_id, queued.status == RunStatus.QUEUED.value, ~queued.proposed)
        .scalar_subquery()
    )
    tracked = and_(
        ~Run.proposed,
        Run.number == first_number,
        ~exists().where(holder.stack_id == Run.stack_id, holder.status.in_(LOCK_VALUES), ~holder.proposed),
        _NO_PERSON_LOCK,
    )
    return select(Run.id).where(Run.status == RunStatus.QUEUED.value, or_(tracked, Run.proposed))


def _locking_batch(candidates: Select[str], order: Any) -> Select[str]:
    # Rows another scheduler has locked are skipped, not waited for: it is claiming them.
    return (
        candidates.order_by(order)
        .limit(bindparam("limit", type_=Integer))
        .with_for_update(of=Run, skip_locked=True)
    )


# Built once: a claim runs them back to back, and building them costs more than running them.
STARTABLE_PLANS = _locking_batch(_startable_plans(), Run.created_at)
QUEUED_APPLIES = _locking_batch(
    select(Run.id).where(Run.status == RunStatus.APPLY_QUEUED.value, _NO_PERSON_LOCK), Run.updated_at
)


async def _claim_batch(
    ctx: Context, unit: Unit, run_ids: Sequence[str], expected: RunStatus, target: RunStatus
) -> list[PhaseLaunch]:
    now = utcnow()
    moved = await change_status_many(
        unit,
        run_ids,
        expected,
        target,
        actor="scheduler",
        phase_attempt=Run.phase_attempt + 1,
        heartbeat_at=now,
    )
    if not moved:
        return []
    phase = PHASE_OF_RUNNING_STATUS[target].value
    tokens = {row.id: new_token("flx") for row in moved}
    await unit.session.execute(
        insert(cast(Table, PhaseToken.__table__)),
        [
            {
                "run_id": row.id,
                "phase": phase,
                "attempt": row.phase_attempt,
                "token_hash": hash_token(tokens[row.id]),
            }
            for row in moved
        ],
    )
    names = {
        stack_id: (org_slug, stack_slug)
        for stack_id, org_slug, stack_slug in await unit.session.execute(
            select(Stack.id, Organization.slug, Stack.slug)
            .join(Organization, Organization.id == Stack.org_id)
            .where(Stack.id.in_({row.stack_id for row in moved}))
        )
    }
    return [
        PhaseLaunch(
            run_id=row.id,
            phase=phase,
            attempt=row.phase_attempt,
            token=tokens[row.id],
            control_plane_url=ctx.settings.public_url,
            org_slug=names[row.stack_id][0],
            stack_slug=names[row.stack_id][1],
        )
        for row in moved
    ]


async def _claim(
    ctx: Context, candidates: Select[str], limit: int, expected: RunStatus, target: RunStatus
) -> list[PhaseLaunch]:
    claimed: list[PhaseLaunch] = []
    locked = False
    try:
        async with ctx.unit() as unit:
            run_ids = list(await unit.session.scalars(candidates, {"limit": limit}))
            try:
                claimed = await _claim_batch(ctx, unit, run_ids, expected, target)
            except StackLocked:
                # A stack got a lock holder after the candidates were read (another path into a
                # lock status): claim them one by one, so the others still start now.
                locked = True
    except DBAPIError:
        if not claimed:
            raise
        return await _committed(ctx, claimed)
    if not locked:
        return claimed
    launches = []
    for run_id in run_ids:
        try:
            async with ctx.unit() as unit:
                launches += await _claim_batch(ctx, unit, [run_id], expected, target)
        except (StackLocked, StatusChanged):
            continue
    return launches


async def _committed(ctx: Context, claimed: list[PhaseLaunch]) -> list[PhaseLaunch]:
    """The claims that committed, when the connection ended with their COMMIT in flight: the
    server may have committed it or not, and its phase tokens say which. Launched, a committed
    claim runs; dropped, its runs would sit in their running status until the heartbeat timeout."""
    by_hash = {hash_token(launch.token): launch for launch in claimed}
    async with ctx.db.read() as session:
        stored = set(
            await session.scalars(select(PhaseToken.token_hash).where(PhaseToken.token_hash.in_(by_hash)))
        )
    return [launch for token_hash, launch in by_hash.items() if token_hash in stored]


async def claim_plans(ctx: Context, limit: int | None = None) -> list[PhaseLaunch]:
    """Claims up to `limit` (CLAIM_BATCH) startable plan phases (queued → planning) in one transaction."""
    return await _claim(ctx, STARTABLE_PLANS, limit or CLAIM_BATCH, RunStatus.QUEUED, RunStatus.PLANNING)


async def hand_over_apply(ctx: Context, unit: Unit, run_id: str) -> bool:
    """Claims the apply of a run that `unit` has just made apply_queued (apply_queued → applying)
    in that unit's transaction, when this process's scheduler launches hand-overs: it launches
    the apply once the unit has committed (Unit.launches). False: nothing claimed, a scheduler
    pass will. The run's row is locked by that change, so no other scheduler can claim it too,
    and the pass the change would have woken here has nothing left to claim: it is not made."""
    if ctx.scheduler is None or not ctx.scheduler.launching:
        return False
    if await unit.session.scalar(select(Run.id).where(Run.id == run_id, _PERSON_LOCK)) is not None:
        return False  # it waits for a person's state lock: a pass claims it once released
    launches = await _claim_batch(ctx, unit, [run_id], RunStatus.APPLY_QUEUED, RunStatus.APPLYING)
    if not launches:
        return False
    unit.launches += launches
    unit.scheduler_claims.discard(APPLIES)
    return True


async def claim_applies(ctx: Context, limit: int | None = None) -> list[PhaseLaunch]:
    """Claims up to `limit` (CLAIM_BATCH) approved applies (apply_queued → applying) in one transaction."""
    return await _claim(ctx, QUEUED_APPLIES, limit or CLAIM_BATCH, RunStatus.APPLY_QUEUED, RunStatus.APPLYING)


async def fail_phase(ctx: Context, ref: PhaseRef, reason: str) -> bool:
    """Fails the run if it is still in that phase and attempt; False when it already moved on."""
    try:
        async with ctx.unit() as unit:
            run = await unit.session.scalar(select(Run).where(Run.id == ref.run_id).with_for_update())
            if run is None or not is_running_phase(run.status, run.phase_attempt, ref.phase, ref.attempt):
                return False
            await fail_run(unit, run, reason, actor="scheduler")
            return True
    except StatusChanged:
        return False


async def on_executor_died(ctx: Context, died: ExecutorDied) -> bool:
    return await fail_phase(ctx, died.ref, died.reason)


async def canceled_since(ctx: Context, since: datetime) -> list[str]:
    """Runs canceled at or after `since`: the scheduler cleans up what their executors left."""
    async with ctx.db.transaction() as session:
        return list(
            await session.scalars(
                select(Run.id).where(Run.status == RunStatus.CANCELED.value, Run.finished_at >= since)
            )
        )


async def running_phases(ctx: Context) -> list[PhaseRef]:
    async with ctx.db.transaction() as session:
        rows = await session.execute(
            select(Run.id, Run.status, Run.phase_attempt).where(Run.status.in_([s.value for s in RUNNING]))
        )
        return [
            PhaseRef(r.id, PHASE_OF_RUNNING_STATUS[RunStatus(r.status)].value, r.phase_attempt) for r in rows
        ]


async def silent_phases(ctx: Context, *, up_since: datetime | None = None) -> list[PhaseRef]:
    """The running phases whose executor has been silent for the heartbeat timeout.
    `up_since`: when this control plane started. Silence is counted from then at the earliest,
    so a control plane's own downtime (when no heartbeat could arrive) never fails a run: after
    a restart, executors get a whole timeout to be heard again."""
    timeout = ctx.settings.heartbeat_timeout
    deadline = utcnow() - timedelta(seconds=timeout)
    if up_since is not None and up_since > deadline:
        return []
    async with ctx.db.transaction() as session:
        rows = (
            await session.execute(
                select(Run.id, Run.status, Run.phase_attempt).where(
                    Run.status.in_([s.value for s in RUNNING]),
                    or_(
                        Run.heartbeat_at < deadline,
                        and_(Run.heartbeat_at.is_(None), Run.updated_at < deadline),
                    ),
                )
            )
        ).all()
    return [PhaseRef(r.id, PHASE_OF_RUNNING_STATUS[RunStatus(r.status)].value, r.phase_attempt) for r in rows]


def silence_reason(ctx: Context) -> str:
    timeout = ctx.settings.heartbeat_timeout
    return f"The executor sent no heartbeat for {timeout:g} seconds (FIRSTLUME_HEARTBEAT_TIMEOUT), so the run was marked failed."


def blame_storage(storage: StorageUnavailable, reason: str) -> str:
    """A phase's failure that the database's storage caused (its executor's heartbeats and reports
    were refused, or its end could not be stored): the run's error says so first."""
    if reason.startswith(STORAGE_PREFIXES):
        return reason
    return (
        f"{storage.reason_prefix}: {storage.what}, so this phase's heartbeats and reports could not be "
        f"stored and its executor was stopped. {reason}"
    )


STORAGE_PREFIXES = tuple(
    StorageUnavailable("", kind=kind).reason_prefix + ":" for kind in ("full", "read_only", "gone")
)


async def expire_heartbeats(ctx: Context, *, up_since: datetime | None = None) -> list[PhaseRef]:
    """Fails every silent phase (see silent_phases)."""
    failed = []
    for ref in await silent_phases(ctx, up_since=up_since):
        if await fail_phase(ctx, ref, silence_reason(ctx)):
            failed.append(ref)
    return failed
