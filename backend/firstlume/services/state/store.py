"""A unit's state versions: stored sealed, kept, and never going backwards."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import KeyRing
from firstlume.db.models import StateHead, StateVersion
from firstlume.db.types import utcnow
from firstlume.domain.audit import AuditAction
from firstlume.domain.errors import Conflict, NotFound
from firstlume.domain.state import check_write, parse_state, reserialed, seal_context
from firstlume.services import audit
from firstlume.services.reads.catalog import StackRecord
from firstlume.services.state.callers import StateCaller
from firstlume.services.state.heads import find_head, head_for_update
from firstlume.services.state.locks import StateLocked, lock_json, release_if_stale


class LockMismatch(Conflict):
    code = "lock_mismatch"


@dataclass(frozen=True, slots=True)
class Written:
    """The version a write left current."""

    serial: int
    lineage: str
    sha256: str
    resources: int
    created: bool  # False: the current version was sent again

    @classmethod
    def of(cls, version: StateVersion, *, created: bool) -> Written:
        return cls(version.serial, version.lineage, version.sha256, version.resources, created)


async def write_state(
    session: AsyncSession,
    keyring: KeyRing,
    caller: StateCaller,
    unit: str,
    raw: bytes,
    lock_id: str | None,
    *,
    force: bool = False,
) -> Written:
    """Stores `raw` as the unit's new version. `force` (`terraform state push -force` through the
    CLI's `cloud` block) replaces the state whatever its lineage and serial, as HCP Terraform
    does; versions are kept by serial, so a forced state that does not go forward is stored
    with the next serial (the only change made to it)."""
    document = parse_state(raw)
    head = await head_for_update(session, caller.stack, unit)
    if force and head.serial is not None and document.serial <= head.serial:
        document = parse_state(reserialed(document, head.serial + 1))
    await release_if_stale(session, head)
    if head.lock_id is not None and lock_id != head.lock_id:
        raise StateLocked(head, "writes need the lock's ID (?ID=<lock id>)")
    if head.lock_id is None and lock_id:
        raise LockMismatch(
            f"The lock {lock_id} is not held (it was released or force-unlocked): nothing was stored.",
            lock_id=lock_id,
        )
    current = await _version(session, head.id, head.serial) if head.serial is not None else None
    lineage = None if force else head.lineage
    if not check_write(head.serial, lineage, current.sha256 if current else None, document):
        assert current is not None
        return Written.of(current, created=False)
    version = StateVersion(
        head_id=head.id,
        serial=document.serial,
        lineage=document.lineage,
        sha256=document.sha256,
        resources=document.resources,
        state_sealed=keyring.encrypt(raw, seal_context(caller.stack.id, unit, document.serial)),
        created_at=utcnow(),
        created_by_id=caller.actor.user_id if caller.actor else None,
        run_id=caller.run_id,
        run_phase=caller.phase,
    )
    session.add(version)
    head.serial, head.lineage = document.serial, document.lineage
    await session.flush()
    if caller.actor is not None:
        # A person's write (Terraform's http backend by hand); a run's are in its own record.
        await audit.record(
            session,
            caller.stack,
            AuditAction.STATE_WRITE,
            f"state:{caller.stack.slug}:{unit}",
            {"unit": unit, "serial": document.serial, "lineage": document.lineage}
            | ({"forced": True} if force else {}),
            actor=caller.actor,
        )
    return Written.of(version, created=True)


async def _version(session: AsyncSession, head_id: str, serial: int) -> StateVersion | None:
    return await session.scalar(
        select(StateVersion).where(StateVersion.head_id == head_id, StateVersion.serial == serial)
    )


async def current_state(
    session: AsyncSession, keyring: KeyRing, stack: StackRecord, unit: str
) -> bytes | None:
    head = await find_head(session, stack, unit)
    if head is None or head.serial is None:
        return None
    return await version_state(session, keyring, stack, unit, head.serial)


async def version_state(
    session: AsyncSession, keyring: KeyRing, stack: StackRecord, unit: str, serial: int
) -> bytes:
    version = await session.scalar(
        select(StateVersion)
        .join(StateHead, StateHead.id == StateVersion.head_id)
        .where(StateHead.stack_id == stack.id, StateHead.unit == unit, StateVersion.serial == serial)
    )
    if version is None:
        raise NotFound(f"No state version with serial {serial}.")
    return keyring.decrypt(version.state_sealed, seal_context(stack.id, unit, serial))


async def delete_state(session: AsyncSession, caller: StateCaller, unit: str) -> int:
    """Deletes the unit's state and every version of it (Terraform's purge); the lock stays.
    Returns how many versions were deleted."""
    caller.require_person("delete a state")
    head = await head_for_update(session, caller.stack, unit)
    result = await session.execute(delete(StateVersion).where(StateVersion.head_id == head.id))
    head.serial, head.lineage = None, None
    deleted = int(result.rowcount)  # type: ignore[attr-defined]
    await audit.record(
        session,
        caller.stack,
        AuditAction.STATE_DELETE,
        f"state:{caller.stack.slug}:{unit}",
        {"unit": unit, "versions": deleted},
        actor=caller.actor,
    )
    return deleted


__all__ = ["LockMismatch", "StateLocked", "Written", "lock_json"]
