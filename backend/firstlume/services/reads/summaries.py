"""Where each stack stands, as the stacks list shows it: the outcome of its last apply (not its
newest run: a plan queued behind an applied stack does not make the stack "queued"), how many of
its runs await a person's approval, how many are under way, and its drift.

Three statements for any number of stacks (a DataLoader hands them all at once): the last
finished apply of each stack by the (stack_id, status, number) index, the counts of waiting and
active runs grouped by stack, and the latest finished drift run of each stack."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import and_, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Run
from firstlume.domain.drift import DRIFT_OUTCOMES, DriftStatus
from firstlume.domain.runs import ACTIVE, RunStatus, RunType
from firstlume.services.reads.rows import column_rows
from firstlume.services.reads.runs import RUN_COLUMNS, RunRecord

# An apply (or a destroy) that ended: what the stack's infrastructure last became.
APPLY_TYPES = sorted(t.value for t in (RunType.APPLY, RunType.DESTROY))
APPLY_OUTCOMES = sorted(s.value for s in (RunStatus.APPLIED, RunStatus.FAILED))
DRIFT_OUTCOME_VALUES = sorted(s.value for s in DRIFT_OUTCOMES)
# Runs under way that wait for nobody (queued, planning, applying, …): approval is counted apart.
UNDER_WAY = sorted(s.value for s in ACTIVE if s is not RunStatus.AWAITING_APPROVAL)


@dataclass(frozen=True, slots=True)
class StackSummary:
    stack_id: str
    # The newest apply or destroy run that ended applied or failed; None: never applied.
    last_apply: RunRecord | None
    awaiting_approval: int
    active: int
    # The outcome of the newest finished drift run; unknown: never checked.
    drift: DriftStatus


async def _newest(
    session: AsyncSession, stack_ids: Sequence[str], types: list[str], statuses: list[str]
) -> dict[str, RunRecord]:
    """Each stack's newest run of one of `types` in one of `statuses` (by run number)."""
    newest = (
        select(Run.stack_id.label("stack_id"), func.max(Run.number).label("number"))
        .where(Run.stack_id.in_(stack_ids), Run.type.in_(types), Run.status.in_(statuses))
        .group_by(Run.stack_id)
        .subquery()
    )
    rows = await column_rows(
        session,
        select(*RUN_COLUMNS).join(
            newest, and_(newest.c.stack_id == Run.stack_id, newest.c.number == Run.number)
        ),
    )
    return {record.stack_id: record for record in (RunRecord(*row) for row in rows)}


async def stack_summaries(session: AsyncSession, stack_ids: Sequence[str]) -> list[StackSummary]:
    """The summary of each stack, in the order asked."""
    wanted = sorted(set(stack_ids))
    if not wanted:
        return []
    applies = await _newest(session, wanted, APPLY_TYPES, APPLY_OUTCOMES)
    drifts = await _newest(session, wanted, [RunType.DRIFT.value], DRIFT_OUTCOME_VALUES)
    counted = await column_rows(
        session,
        select(Run.stack_id, Run.status, func.count())
        .where(Run.stack_id.in_(wanted), Run.status.in_([RunStatus.AWAITING_APPROVAL.value, *UNDER_WAY]))
        .group_by(Run.stack_id, Run.status),
    )
    waiting: dict[str, int] = {}
    active: dict[str, int] = {}
    for stack_id, status, count in counted:
        into = waiting if status == RunStatus.AWAITING_APPROVAL.value else active
        into[stack_id] = into.get(stack_id, 0) + int(count)
    return [
        StackSummary(
            stack_id=stack_id,
            last_apply=applies.get(stack_id),
            awaiting_approval=waiting.get(stack_id, 0),
            active=active.get(stack_id, 0),
            drift=DRIFT_OUTCOMES[RunStatus(drifts[stack_id].status)]
            if stack_id in drifts
            else DriftStatus.UNKNOWN,
        )
        for stack_id in stack_ids
    ]
