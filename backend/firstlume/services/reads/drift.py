"""Reads of drift: the organization's fleet view (each stack in sync, drifted, in error or not
yet checked, and since when) and a stack's drift history with the addresses that drifted.

A stack's drift status is the outcome of its latest finished drift run: no_changes → in_sync,
drifted → drifted, failed → error; none yet → unknown. "Since" is when the stack entered that
status: the end of the oldest drift run of the current streak of that outcome. Each function
answers in a fixed number of statements, whatever the fleet's size."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Select, and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import ResourceChange, Run, Stack
from firstlume.domain.drift import DRIFT_OUTCOMES, DriftStatus
from firstlume.domain.runs import RunStatus, RunType
from firstlume.services.reads.rows import column_rows
from firstlume.services.reads.runs import RUN_COLUMNS, RunRecord

OUTCOMES = DRIFT_OUTCOMES
OUTCOME_VALUES = sorted(s.value for s in OUTCOMES)
# The addresses a drift line names at most (a count says how many there are in all).
MAX_ADDRESSES = 200


@dataclass(frozen=True, slots=True)
class DriftedResource:
    address: str
    action: str


@dataclass(frozen=True, slots=True)
class StackDrift:
    stack_id: str
    stack_slug: str
    stack_name: str
    status: DriftStatus
    since: datetime | None
    last_run: RunRecord | None
    drifted: list[DriftedResource]
    # How many resources drifted in all (`drifted` names the first MAX_ADDRESSES).
    drifted_count: int = 0


@dataclass(frozen=True, slots=True)
class DriftRun:
    run: RunRecord
    status: DriftStatus
    drifted: list[DriftedResource]


def outcome(run: RunRecord | None) -> DriftStatus:
    return (
        OUTCOMES.get(RunStatus(run.status), DriftStatus.UNKNOWN) if run is not None else DriftStatus.UNKNOWN
    )


async def drifted_resources(
    session: AsyncSession, run_ids: Sequence[str]
) -> dict[str, list[DriftedResource]]:
    """Each drifted run's changed addresses, in plan order (the first MAX_ADDRESSES)."""
    if not run_ids:
        return {}
    rows = await session.execute(
        select(ResourceChange.run_id, ResourceChange.address, ResourceChange.action)
        .where(ResourceChange.run_id.in_(run_ids), ResourceChange.position < MAX_ADDRESSES)
        .order_by(ResourceChange.run_id, ResourceChange.position)
    )
    found: dict[str, list[DriftedResource]] = defaultdict(list)
    for run_id, address, action in rows:
        found[run_id].append(DriftedResource(address, action))
    return found


async def drifted_counts(session: AsyncSession, run_ids: Sequence[str]) -> dict[str, int]:
    """How many resources each drifted run found drifted, in one statement."""
    if not run_ids:
        return {}
    rows = await session.execute(
        select(ResourceChange.run_id, func.count())
        .where(ResourceChange.run_id.in_(run_ids))
        .group_by(ResourceChange.run_id)
    )
    return {run_id: int(count) for run_id, count in rows}


SelectT = TypeVar("SelectT", bound="Select[*tuple[Any, ...]]")


def _finished_drift(query: SelectT) -> SelectT:
    return query.where(Run.type == RunType.DRIFT.value, Run.status.in_(OUTCOME_VALUES))


async def overview(session: AsyncSession, org_id: str) -> list[StackDrift]:
    """One line per stack of the organization, by slug."""
    stacks = (
        await session.execute(
            select(Stack.id, Stack.slug, Stack.name)
            .where(Stack.org_id == org_id, Stack.deleted_at.is_(None))
            .order_by(Stack.slug)
        )
    ).all()
    ranked = _finished_drift(
        select(
            Run.id.label("run_id"),
            Run.stack_id.label("stack_id"),
            Run.status.label("status"),
            func.row_number()
            .over(partition_by=Run.stack_id, order_by=(Run.finished_at.desc(), Run.number.desc()))
            .label("rank"),
        ).where(Run.org_id == org_id)
    ).subquery()
    latest = select(ranked.c.run_id, ranked.c.stack_id, ranked.c.status).where(ranked.c.rank == 1).subquery()
    latest_runs = {
        row.stack_id: RunRecord(*row)
        for row in await column_rows(session, select(*RUN_COLUMNS).join(latest, latest.c.run_id == Run.id))
    }
    # When each stack last had another outcome than its latest …
    other = _finished_drift(
        select(Run.stack_id.label("stack_id"), func.max(Run.finished_at).label("last_other"))
        .join(latest, latest.c.stack_id == Run.stack_id)
        .where(Run.status != latest.c.status)
        .group_by(Run.stack_id)
    ).subquery()
    # … and the first run of the latest outcome after that: the streak's start.
    since_rows = await session.execute(
        _finished_drift(
            select(Run.stack_id, func.min(Run.finished_at))
            .join(latest, and_(latest.c.stack_id == Run.stack_id, latest.c.status == Run.status))
            .outerjoin(other, other.c.stack_id == Run.stack_id)
            .where(or_(other.c.last_other.is_(None), Run.finished_at > other.c.last_other))
            .group_by(Run.stack_id)
        )
    )
    since = {stack_id: at for stack_id, at in since_rows}
    drifted_ids = [r.id for r in latest_runs.values() if r.status == RunStatus.DRIFTED]
    addresses = await drifted_resources(session, drifted_ids)
    counts = await drifted_counts(session, drifted_ids)
    return [
        StackDrift(
            stack_id=stack_id,
            stack_slug=slug,
            stack_name=name,
            status=outcome(latest_runs.get(stack_id)),
            since=since.get(stack_id),
            last_run=latest_runs.get(stack_id),
            drifted=addresses.get(latest_runs[stack_id].id, []) if stack_id in latest_runs else [],
            drifted_count=counts.get(latest_runs[stack_id].id, 0) if stack_id in latest_runs else 0,
        )
        for stack_id, slug, name in stacks
    ]


async def history(
    session: AsyncSession, stack_id: str, *, limit: int = 50, before: int | None = None
) -> list[DriftRun]:
    """The stack's drift runs, newest first (any status: a queued or running one too), each with
    the addresses that drifted."""
    query = select(*RUN_COLUMNS).where(Run.stack_id == stack_id, Run.type == RunType.DRIFT.value)
    if before is not None:
        query = query.where(Run.number < before)
    rows = await column_rows(session, query.order_by(Run.number.desc()).limit(limit))
    found = [RunRecord(*row) for row in rows]
    addresses = await drifted_resources(session, [r.id for r in found if r.status == RunStatus.DRIFTED])
    return [DriftRun(run=r, status=outcome(r), drifted=addresses.get(r.id, [])) for r in found]
