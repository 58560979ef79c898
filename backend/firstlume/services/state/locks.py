"""Terraform's state lock (the http backend's LOCK and UNLOCK), held in the name of a person or
of a run's phase, and the admin's force-unlock."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Run, StateHead
from firstlume.db.types import utcnow
from firstlume.domain.audit import AuditAction
from firstlume.domain.claims import BOTH
from firstlume.domain.errors import Conflict
from firstlume.domain.runs import PHASE_OF_RUNNING_STATUS, WAITS_FOR_STATE_LOCK, RunStatus
from firstlume.protocol.events import RunUpdated
from firstlume.pubsub import run_channel
from firstlume.services import audit
from firstlume.services.context import Unit
from firstlume.services.reads.state import StateHeadRecord
from firstlume.services.state.callers import StateCaller
from firstlume.services.state.heads import find_head, head_for_update


class StateLocked(Conflict):
    """The lock is held by someone else: 423, with the holder and Terraform's lock info."""

    code = "state_locked"
    http_status = 423

    def __init__(self, head: StateHead, why: str) -> None:
        lock = lock_json(head)
        super().__init__(
            f"The state is locked by {head.lock_holder} (lock {head.lock_id}); {why}.", lock=lock
        )
        self.lock_info = dict(head.lock_info or {"ID": head.lock_id or ""})


class LockHeldByOther(Conflict):
    """UNLOCK with another ID than the lock's: 409, with the current lock."""

    code = "lock_id_mismatch"

    def __init__(self, head: StateHead, given: str) -> None:
        super().__init__(
            f"The lock is {head.lock_id}, held by {head.lock_holder}; {given} does not unlock it.",
            lock=lock_json(head),
        )
        self.lock_info = dict(head.lock_info or {"ID": head.lock_id or ""})


def lock_json(head: StateHead | StateHeadRecord | None) -> dict[str, Any] | None:
    """The lock as the API shows it: Terraform's lock info and who holds it."""
    if head is None or head.lock_id is None:
        return None
    info = head.lock_info or {}
    return {
        "id": head.lock_id,
        "holder": head.lock_holder,
        "run": head.lock_run_id,
        "phase": head.lock_phase.value if head.lock_phase else None,
        "operation": info.get("Operation"),
        "who": info.get("Who"),
        "info": info.get("Info"),
        "version": info.get("Version"),
        "created": info.get("Created"),
        "locked_at": head.locked_at.isoformat().replace("+00:00", "Z") if head.locked_at else None,
    }


async def release_if_stale(session: AsyncSession, head: StateHead) -> None:
    """A lock taken by a run's phase that has ended (its executor died before unlocking) holds
    nothing any more: its token is dead, so nobody could write under it. It is released."""
    if head.lock_run_id is None or head.lock_phase is None:
        return
    status = await session.scalar(select(Run.status).where(Run.id == head.lock_run_id))
    if status is None or PHASE_OF_RUNNING_STATUS.get(RunStatus(status)) != head.lock_phase:
        _clear(head)


def _clear(head: StateHead) -> None:
    head.lock_id = None
    head.lock_info = None
    head.lock_user_id = head.lock_run_id = None
    head.lock_phase = None
    head.lock_holder = None
    head.locked_at = None


def take_lock(head: StateHead, info: dict[str, str], *, holder: str, user_id: str | None,
              run_id: str | None, phase: Any) -> bool:  # fmt: skip
    """Takes the lock for `info["ID"]`; True when taken (or already held under that ID)."""
    if head.lock_id is not None:
        return head.lock_id == info["ID"]
    head.lock_id = info["ID"]
    head.lock_info = info
    head.lock_user_id, head.lock_run_id, head.lock_phase = user_id, run_id, phase
    head.lock_holder = holder
    head.locked_at = utcnow()
    return True


def release_lock(head: StateHead, lock_id: str) -> None:
    """UNLOCK: releases the lock if `lock_id` is its ID; an unlocked state stays unlocked."""
    if head.lock_id is None:
        return
    if head.lock_id != lock_id:
        raise LockHeldByOther(head, lock_id)
    _clear(head)


def force_release(head: StateHead) -> dict[str, Any] | None:
    """Releases whatever lock is held; returns the lock that was released."""
    released = lock_json(head)
    _clear(head)
    return released


# -- use cases ------------------------------------------------------------------------------------


async def lock_state(
    session: AsyncSession, caller: StateCaller, unit: str, info: dict[str, str]
) -> dict[str, Any] | None:
    """LOCK: takes the lock in the caller's name, or raises StateLocked (423) with the holder.
    Returns the lock as lock_json shows it."""
    head = await head_for_update(session, caller.stack, unit)
    await release_if_stale(session, head)
    taken = take_lock(
        head,
        info,
        holder=caller.name,
        user_id=caller.actor.user_id if caller.actor else None,
        run_id=caller.run_id,
        phase=caller.phase,
    )
    if not taken:
        raise StateLocked(head, "wait for it to be released, or ask an admin to force-unlock it")
    return lock_json(head)


async def unlock_state(session: AsyncSession, caller: StateCaller, unit: str, lock_id: str) -> bool:
    """UNLOCK; True when it released a lock a person held (runs may be waiting for it)."""
    head = await head_for_update(session, caller.stack, unit)
    await release_if_stale(session, head)
    by_person = head.lock_id is not None and head.lock_phase is None
    release_lock(head, lock_id)
    return by_person


async def person_lock_changed(unit_of_work: Unit, stack_id: str) -> None:
    """A person took or released a state lock of the stack: the runs that wait for it (or now
    would) show it at once (a best-effort wake-up of their live views: their `waitingFor`), and
    once released they start at this process's next scheduler pass, now, rather than at its
    interval (other replicas find them at theirs)."""
    unit_of_work.wakes_scheduler = True
    unit_of_work.scheduler_claims |= BOTH
    waiting = await unit_of_work.session.scalars(
        select(Run.id).where(
            Run.stack_id == stack_id, Run.status.in_([s.value for s in WAITS_FOR_STATE_LOCK])
        )
    )
    for run_id in waiting:
        unit_of_work.publish_after_commit(run_channel(run_id), RunUpdated(run_id=run_id))


async def force_unlock(session: AsyncSession, caller: StateCaller, unit: str) -> dict[str, Any] | None:
    """DELETE …/state/lock (admin): releases the lock whoever holds it; returns what it released."""
    caller.require_person("force-unlock a state")
    head = await find_head(session, caller.stack, unit)
    if head is None:
        return None
    head = await head_for_update(session, caller.stack, unit)
    released = force_release(head)
    if released is not None:
        await audit.record(
            session,
            caller.stack,
            AuditAction.STATE_FORCE_UNLOCK,
            f"state:{caller.stack.slug}:{unit}",
            {"unit": unit, "lock": released["id"], "holder": released["holder"]},
            actor=caller.actor,
        )
    return released
