"""Prepared applies: an apply's executor started while its plan still runs.

An apply's executor spends its first ~0.1 s on its spec, a checkout and `terraform init`, none of
which needs the plan's result. When a run will apply without anyone's approval, its apply's
executor is launched as soon as the plan's `init` has ended: it checks out the plan's commit and
initializes while the plan runs, then waits on `GET /plan`, which answers once the run is
`applying` (the plan's result claimed the apply and adopted the prepared phase instead of
launching another). The lifecycle is unchanged: the apply's token is valid for the spec and the
plan download alone until then, and every other end of the plan (approval after all, no changes,
a failure) revokes it, so the prepared executor stops with a 401.

Only a launcher whose executors start in a fraction of a second prepares applies (the local
launcher's spares): a Kubernetes Job takes seconds to be scheduled, and a prepared Job that dies
before its apply begins would not be noticed until the heartbeat timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

from sqlalchemy import Table, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import hash_token, new_token
from firstlume.db.models import Organization, PhaseToken, Run, Stack
from firstlume.db.types import utcnow
from firstlume.domain.runs import Phase, RunType, StepStatus, is_prepared_phase
from firstlume.launchers.base import PhaseLaunch, PhaseRef
from firstlume.protocol.executor import ReportBatch
from firstlume.services.context import Context, Unit
from firstlume.services.inherited import effective_settings

# The plan's step whose end starts the apply's preparation: the commit is known, and the code
# initializes (a plan whose init fails prepares nothing).
PREPARE_AFTER_STEP = "init"
# How long one `GET /plan` of a prepared apply waits for the apply to begin before it answers
# 204 (ask again): well under the executor's read timeout, and any proxy's.
WAIT_SECONDS = 20.0


def _ends_prepare_step(batch: ReportBatch) -> bool:
    return any(
        r.kind == "step" and r.name == PREPARE_AFTER_STEP and r.status == StepStatus.DONE
        for r in batch.reports
    )


async def prepare_apply(
    ctx: Context, unit: Unit, run: Run, phase: str, batch: ReportBatch
) -> Callable[[], None] | None:
    """After a plan's reports are recorded in `unit`: when they end its init and the run will
    apply without approval (as the rule reads now; it is read again when the plan finishes), a
    token for the apply's attempt, and what launches its executor once `unit` commits."""
    launch_claimed = ctx.launch_claimed
    if launch_claimed is None or not ctx.prepares_applies or phase != Phase.PLAN:
        return None
    if not RunType(run.type).intends_to_apply or not _ends_prepare_step(batch) or not run.commit_sha:
        return None
    session = unit.session
    attempt = run.phase_attempt + 1
    already = await session.scalar(
        select(PhaseToken.id).where(
            PhaseToken.run_id == run.id, PhaseToken.phase == Phase.APPLY, PhaseToken.attempt == attempt
        )
    )
    if already is not None:
        return None  # a retried report
    stack = await session.get(Stack, run.stack_id)
    assert stack is not None
    if (await effective_settings(session, stack))["require_approval"].value:
        return None
    org_slug = await session.scalar(select(Organization.slug).where(Organization.id == stack.org_id))
    token = new_token("flx")
    await session.execute(
        insert(cast(Table, PhaseToken.__table__)),
        [{"run_id": run.id, "phase": Phase.APPLY.value, "attempt": attempt, "token_hash": hash_token(token)}],
    )
    launch = PhaseLaunch(
        run_id=run.id,
        phase=Phase.APPLY.value,
        attempt=attempt,
        token=token,
        control_plane_url=ctx.settings.public_url,
        org_slug=str(org_slug),
        stack_slug=stack.slug,
    )
    return lambda: launch_claimed([launch])


async def adopted(session: AsyncSession, run_attempts: Sequence[tuple[str, int]]) -> set[str]:
    """Of runs whose apply was just claimed at these attempts, those whose apply was prepared:
    its live token is the phase's, and its executor is already waiting."""
    if not run_attempts:
        return set()
    wanted = set(run_attempts)
    rows = await session.execute(
        select(PhaseToken.run_id, PhaseToken.attempt).where(
            PhaseToken.run_id.in_({run_id for run_id, _ in run_attempts}),
            PhaseToken.phase == Phase.APPLY,
            PhaseToken.revoked_at.is_(None),
        )
    )
    return {run_id for run_id, attempt in rows if (run_id, attempt) in wanted}


async def drop_prepared(session: AsyncSession, run: Run, ref: PhaseRef) -> bool:
    """The executor of a prepared apply ended before its apply began: its token is revoked, so
    that the apply's claim launches a new executor instead of waiting for this one."""
    if not is_prepared_phase(run.status, run.phase_attempt, ref.phase, ref.attempt):
        return False
    await session.execute(
        update(PhaseToken)
        .where(
            PhaseToken.run_id == run.id,
            PhaseToken.phase == ref.phase,
            PhaseToken.attempt == ref.attempt,
            PhaseToken.revoked_at.is_(None),
        )
        .values(revoked_at=utcnow())
    )
    return True
