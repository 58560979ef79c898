"""Claiming work for executors: which phase starts next, and failing phases whose executor is gone.

Several control-plane processes may run this at once against one PostgreSQL database. A claim
locks the run row with SKIP LOCKED (another scheduler holding it means it is being claimed),
then moves its status with a compare-and-set; the one-lock-per-stack index is the last guard.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import and_, exists, func, or_, select
from sqlalchemy.orm import aliased

from firstlume.crypto import hash_token, new_token
from firstlume.db.models import Organization, PhaseToken, Run, Stack
from firstlume.db.types import utcnow
from firstlume.domain.errors import StackLocked, StatusChanged
from firstlume.domain.runs import HOLDS_LOCK, PHASE_OF_RUNNING_STATUS, RUNNING, RunStatus, is_running_phase
from firstlume.launchers.base import ExecutorDied, PhaseLaunch, PhaseRef
from firstlume.services.context import Context
from firstlume.services.execution import fail_run
from firstlume.services.transitions import change_status

LOCK_VALUES = [s.value for s in HOLDS_LOCK]


async def _next_queued_run_ids(ctx: Context, limit: int) -> list[str]:
    """The first queued run of every stack that no run currently locks, oldest first."""
    queued = aliased(Run)
    holder = aliased(Run)
    first_number = (
        select(func.min(queued.number))
        .where(queued.stack_id == Run.stack_id, queued.status == RunStatus.QUEUED.value)
        .scalar_subquery()
    )
    query = (
        select(Run.id)
        .where(
            Run.status == RunStatus.QUEUED.value,
            Run.number == first_number,
            ~exists().where(holder.stack_id == Run.stack_id, holder.status.in_(LOCK_VALUES)),
        )
        .order_by(Run.created_at)
        .limit(limit)
    )
    async with ctx.db.transaction() as session:
        return list(await session.scalars(query))


async def _claim(ctx: Context, run_id: str, expected: RunStatus, target: RunStatus) -> PhaseLaunch | None:
    try:
        async with ctx.unit() as unit:
            run = await unit.session.scalar(
                select(Run)
                .where(Run.id == run_id, Run.status == expected.value)
                .with_for_update(skip_locked=True)
            )
            if run is None:
                return None
            attempt = run.phase_attempt + 1
            now = utcnow()
            await change_status(unit, run, target, actor="scheduler", phase_attempt=attempt, heartbeat_at=now)
            phase = PHASE_OF_RUNNING_STATUS[target]
            token = new_token("flx")
            unit.session.add(
                PhaseToken(run_id=run.id, phase=phase.value, attempt=attempt, token_hash=hash_token(token))
            )
            names = (
                await unit.session.execute(
                    select(Organization.slug, Stack.slug)
                    .join(Stack, Stack.org_id == Organization.id)
                    .where(Stack.id == run.stack_id)
                )
            ).one()
            return PhaseLaunch(
                run_id=run.id,
                phase=phase.value,
                attempt=attempt,
                token=token,
                control_plane_url=ctx.settings.public_url,
                org_slug=names[0],
                stack_slug=names[1],
            )
    except (StackLocked, StatusChanged):
        return None


async def claim_plans(ctx: Context, limit: int = 20) -> list[PhaseLaunch]:
    claimed = []
    for run_id in await _next_queued_run_ids(ctx, limit):
        launch = await _claim(ctx, run_id, RunStatus.QUEUED, RunStatus.PLANNING)
        if launch:
            claimed.append(launch)
    return claimed


async def claim_applies(ctx: Context, limit: int = 20) -> list[PhaseLaunch]:
    async with ctx.db.transaction() as session:
        run_ids = list(
            await session.scalars(
                select(Run.id)
                .where(Run.status == RunStatus.APPLY_QUEUED.value)
                .order_by(Run.updated_at)
                .limit(limit)
            )
        )
    claimed = []
    for run_id in run_ids:
        launch = await _claim(ctx, run_id, RunStatus.APPLY_QUEUED, RunStatus.APPLYING)
        if launch:
            claimed.append(launch)
    return claimed


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


async def running_phases(ctx: Context) -> list[PhaseRef]:
    async with ctx.db.transaction() as session:
        rows = await session.execute(
            select(Run.id, Run.status, Run.phase_attempt).where(Run.status.in_([s.value for s in RUNNING]))
        )
        return [
            PhaseRef(r.id, PHASE_OF_RUNNING_STATUS[RunStatus(r.status)].value, r.phase_attempt) for r in rows
        ]


async def expire_heartbeats(ctx: Context) -> list[PhaseRef]:
    timeout = ctx.settings.heartbeat_timeout
    deadline = utcnow() - timedelta(seconds=timeout)
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
    failed = []
    for row in rows:
        ref = PhaseRef(row.id, PHASE_OF_RUNNING_STATUS[RunStatus(row.status)].value, row.phase_attempt)
        reason = f"The executor sent no heartbeat for {timeout:g} seconds (FIRSTLUME_HEARTBEAT_TIMEOUT), so the run was marked failed."
        if await fail_phase(ctx, ref, reason):
            failed.append(ref)
    return failed
