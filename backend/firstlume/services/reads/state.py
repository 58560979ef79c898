"""Reads of managed state: units and their locks, versions newest first (never their contents:
those are decrypted only by services/state for callers allowed to read them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, and_, bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Run, StateHead, StateVersion, User
from firstlume.domain.runs import Phase
from firstlume.services.reads.rows import column_rows, columns_of

MAX_VERSIONS = 1000


@dataclass(frozen=True, slots=True)
class StateHeadRecord:
    """A unit's current serial and lineage, and its lock: Terraform's lock info and who holds it
    (a person, or a run's phase)."""

    id: str
    stack_id: str
    unit: str
    serial: int | None
    lineage: str | None
    lock_id: str | None
    lock_info: dict[str, Any] | None
    lock_run_id: str | None
    lock_phase: Phase | None
    lock_holder: str | None
    locked_at: datetime | None


HEAD_COLUMNS = columns_of(StateHeadRecord, cast(Table, StateHead.__table__))


@dataclass(frozen=True, slots=True)
class PersonLock:
    """A state lock held by a person (not by a run's phase): runs of its stack wait for it."""

    unit: str
    holder: str
    locked_at: datetime | None


def held_by_person() -> Any:
    """The condition on StateHead of a lock that a person holds: a run's phase lock names it."""
    return and_(StateHead.lock_id.is_not(None), StateHead.lock_phase.is_(None))


async def person_locks(session: AsyncSession, stack_ids: Sequence[str]) -> list[PersonLock | None]:
    """For each stack, a state lock a person holds on one of its units (the oldest), or None."""
    rows = await column_rows(
        session,
        select(StateHead.stack_id, StateHead.unit, StateHead.lock_holder, StateHead.locked_at)
        .where(StateHead.stack_id.in_(set(stack_ids)), held_by_person())
        .order_by(StateHead.locked_at),
    )
    found: dict[str, PersonLock] = {}
    for stack_id, unit, holder, locked_at in rows:
        found.setdefault(stack_id, PersonLock(unit=unit, holder=holder or "someone", locked_at=locked_at))
    return [found.get(i) for i in stack_ids]


@dataclass(frozen=True, slots=True)
class VersionRecord:
    serial: int
    lineage: str
    sha256: str
    resources: int
    created_at: datetime
    created_by: str | None  # the person's email; None when a run wrote it
    run_id: str | None
    run_number: int | None
    run_phase: str | None

    @property
    def writer(self) -> str:
        """Who wrote it, as people read it."""
        if self.run_number is not None:
            return f"run #{self.run_number} ({self.run_phase} phase)"
        return self.created_by or "unknown"


async def heads_of_stacks(session: AsyncSession, stack_ids: Sequence[str]) -> list[list[StateHeadRecord]]:
    """Each stack's units with managed state (or a lock), by unit path."""
    rows = await column_rows(
        session,
        select(*HEAD_COLUMNS)
        .where(StateHead.stack_id.in_(stack_ids))
        .order_by(StateHead.stack_id, StateHead.unit),
    )
    grouped: dict[str, list[StateHeadRecord]] = {stack_id: [] for stack_id in stack_ids}
    for row in rows:
        head = StateHeadRecord(*row)
        grouped[head.stack_id].append(head)
    return [grouped[stack_id] for stack_id in stack_ids]


_HEAD = select(*HEAD_COLUMNS).where(
    StateHead.stack_id == bindparam("stack_id"), StateHead.unit == bindparam("unit")
)


async def head_of(session: AsyncSession, stack_id: str, unit: str) -> StateHeadRecord | None:
    rows = await column_rows(session, _HEAD, {"stack_id": stack_id, "unit": unit})
    return StateHeadRecord(*rows[0]) if rows else None


async def versions(
    session: AsyncSession, head_id: str, *, limit: int, before: int | None = None
) -> list[VersionRecord]:
    """The unit's versions, newest first: `limit` of them, below serial `before` when given."""
    query = (
        select(
            StateVersion.serial,
            StateVersion.lineage,
            StateVersion.sha256,
            StateVersion.resources,
            StateVersion.created_at,
            User.email,
            StateVersion.run_id,
            Run.number,
            StateVersion.run_phase,
        )
        .outerjoin(User, User.id == StateVersion.created_by_id)
        .outerjoin(Run, Run.id == StateVersion.run_id)
        .where(StateVersion.head_id == head_id)
        .order_by(StateVersion.serial.desc())
        .limit(min(limit, MAX_VERSIONS))
    )
    if before is not None:
        query = query.where(StateVersion.serial < before)
    return [
        VersionRecord(
            serial=serial,
            lineage=lineage,
            sha256=sha256,
            resources=resources,
            created_at=created_at,
            created_by=email,
            run_id=run_id,
            run_number=number,
            run_phase=phase.value if phase is not None else None,
        )
        for serial, lineage, sha256, resources, created_at, email, run_id, number, phase in await session.execute(
            query
        )
    ]
