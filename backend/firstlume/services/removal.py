"""Deleting stacks and folders.

A deleted stack is not gone at once: it leaves every list, its slug is free for a new stack, and
nothing starts a run of it any more, but its row, runs, state versions and audit entries are
kept for the retention period (FIRSTLUME_DELETED_STACK_RETENTION_DAYS), readable by admins under
`deleted-stacks/<id>`. Then `purge_deleted_stacks` removes it with its runs and state (the audit
trail, the organization's own, stays). A folder is deleted only when it holds nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Folder, Run, Stack, StateHead, StateVersion, Variable
from firstlume.db.models_drift import NotificationDestination
from firstlume.db.types import utcnow
from firstlume.domain.audit import AuditAction
from firstlume.domain.errors import FolderNotEmpty, NotFound, StackBusy, StackHasResources
from firstlume.domain.runs import ACTIVE, APPROVABLE, CANCELABLE, RUNNING, RunStatus
from firstlume.services import audit
from firstlume.services.catalog import described_runs, running_runs, stack_to_change
from firstlume.services.commands import DeleteStack
from firstlume.services.context import Actor, Unit
from firstlume.services.reads import catalog as catalog_reads
from firstlume.services.reads.catalog import DeletedStackRecord, OrganizationRecord, StackRecord, stack_record
from firstlume.services.transitions import change_status

DELETED_REASON = "the stack was deleted"


def tombstone_slug(stack_id: str) -> str:
    """A deleted stack's slug: unique, and never one a person can give (slugs start with a letter
    or digit), so the stack's own slug is free for a new one."""
    return f"~{stack_id}"


async def managed_resources(session: AsyncSession, stack_id: str) -> int:
    """How many resources the current versions of the stack's managed states hold."""
    total = await session.scalar(
        select(func.coalesce(func.sum(StateVersion.resources), 0))
        .join(StateHead, StateHead.id == StateVersion.head_id)
        .where(StateHead.stack_id == stack_id, StateVersion.serial == StateHead.serial)
    )
    return int(total or 0)


async def delete_stack(
    unit: Unit, actor: Actor, org: OrganizationRecord, slug: str, command: DeleteStack
) -> StackRecord:
    """Deletes the stack `slug` (see the module's docstring). Refused while a run is active or while
    its managed state holds resources; `force` deletes it anyway, canceling its queued runs and
    discarding those awaiting approval. A run in a running phase (planning, applying) refuses even
    `force`: stopping Terraform midway can leave resources that no state records."""
    session = unit.session
    stack = await stack_to_change(session, org, slug)
    active = await running_runs(session, stack.id, ACTIVE)
    running = [r for r in active if r.status in RUNNING]
    if running:
        raise StackBusy(
            f"Stack '{slug}' cannot be deleted while run {described_runs(running)} is running; "
            "try again when it has finished.",
            runs=[r.id for r in active],
        )
    if active and not command.force:
        raise StackBusy(
            f"Stack '{slug}' has active runs ({described_runs(active)}): cancel or discard them, "
            "or delete with ?force=true to end them.",
            runs=[r.id for r in active],
        )
    resources = await managed_resources(session, stack.id)
    if resources and not command.force:
        raise StackHasResources(
            f"Stack '{slug}' still manages {resources} resource(s) in its state: destroy them first "
            "(a destroy run), or delete with ?force=true to leave them unmanaged.",
            resources=resources,
        )
    ended = [await _end(unit, actor, run) for run in active]
    destinations = list(
        await session.scalars(
            select(NotificationDestination).where(NotificationDestination.stack_id == stack.id)
        )
    )
    for destination in destinations:
        await session.delete(destination)
    stack.deleted_at = utcnow()
    stack.deleted_by = actor.email
    stack.deleted_slug = stack.slug
    stack.slug = tombstone_slug(stack.id)
    stack.git_seen_commit = None
    await session.flush()
    await audit.record(
        session,
        org,
        AuditAction.STACK_DELETE,
        f"stack:{slug}",
        {
            "forced": command.force,
            "resources": resources,
            "ended_runs": ended,
            "notifications_deleted": [d.name for d in destinations],
        },
        stack=slug,
    )
    return stack_record(stack)


async def _end(unit: Unit, actor: Actor, run: Run) -> str:
    """Ends a run that waits (queued, apply_queued: canceled; awaiting approval: discarded)."""
    previous = RunStatus(run.status)
    if previous in CANCELABLE:
        target = RunStatus.CANCELED
    else:
        assert previous in APPROVABLE
        target = RunStatus.DISCARDED
    await change_status(unit, run, target, actor=actor.email, reason=DELETED_REASON, ended_by=actor.email)
    return run.id


async def delete_folder(session: AsyncSession, org: OrganizationRecord, path: str) -> None:
    """Deletes an empty folder: refused while it holds folders or stacks. Its settings, variables
    and notification destinations go with it (named in the audit entry)."""
    folder = await session.scalar(
        select(Folder).where(Folder.org_id == org.id, Folder.path == path.strip("/")).with_for_update()
    )
    if folder is None:
        raise NotFound(f"No folder '{path}'.")
    children = list(await session.scalars(select(Folder.path).where(Folder.parent_id == folder.id)))
    stacks = list(
        await session.scalars(
            select(Stack.slug)
            .where(Stack.folder_id == folder.id, Stack.deleted_at.is_(None))
            .order_by(Stack.slug)
        )
    )
    if children or stacks:
        held = [f"folder {c}" for c in sorted(children)] + [f"stack {s}" for s in stacks]
        raise FolderNotEmpty(
            f"Folder '{folder.path}' is not empty: it holds {', '.join(held)}. Move or delete them first.",
            folders=sorted(children),
            stacks=stacks,
        )
    # Deleted stacks kept for the retention period remember no folder.
    await session.execute(update(Stack).where(Stack.folder_id == folder.id).values(folder_id=None))
    own_variables = (Variable.org_id == org.id, Variable.scope == "folder", Variable.scope_id == folder.id)
    variables = list(await session.scalars(select(Variable.name).where(*own_variables)))
    await session.execute(delete(Variable).where(*own_variables))
    own_destinations = NotificationDestination.folder_id == folder.id
    destinations = list(await session.scalars(select(NotificationDestination.name).where(own_destinations)))
    await session.execute(delete(NotificationDestination).where(own_destinations))
    await session.delete(folder)
    await session.flush()
    await audit.record(
        session,
        org,
        AuditAction.FOLDER_DELETE,
        f"folder:{folder.path}",
        {"variables_deleted": sorted(variables), "notifications_deleted": sorted(destinations)},
    )


async def deleted_stack(
    session: AsyncSession, org_id: str, stack_id: str
) -> tuple[DeletedStackRecord, StackRecord]:
    """A deleted stack of the organization, not purged yet (NotFound otherwise)."""
    found = await catalog_reads.deleted_stack(session, org_id, stack_id)
    if found is None:
        raise NotFound(f"No deleted stack '{stack_id}' in this organization.")
    return found


# Purge ------------------------------------------------------------------------------------------


async def purge_deleted_stacks(session: AsyncSession, now: datetime, retention: timedelta) -> list[str]:
    """Removes the stacks deleted more than `retention` ago, with their runs, state and stack
    variables (their rows cascade); returns their ids."""
    ids = list(
        await session.scalars(
            select(Stack.id).where(Stack.deleted_at.is_not(None), Stack.deleted_at < now - retention)
        )
    )
    if not ids:
        return []
    await session.execute(delete(Variable).where(Variable.scope == "stack", Variable.scope_id.in_(ids)))
    # Runs first: their state versions and lock rows point at them (SET NULL), then the stack.
    await session.execute(delete(Run).where(Run.stack_id.in_(ids)))
    await session.execute(delete(Stack).where(Stack.id.in_(ids)))
    return ids
