"""Reads of organizations, folders and stacks, by id, by organization, by parent folder, by slug
or path, as read models: OrganizationRecord, FolderRecord and StackRecord, filled from the
columns they name (a stack's credentials are never among them: only which kind it has)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, case, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Folder, Organization, Stack
from firstlume.domain.git import StackTrigger
from firstlume.services.reads.rows import column_rows, columns_of, record_of


@dataclass(frozen=True, slots=True)
class OrganizationRecord:
    id: str
    slug: str
    name: str
    # Its explicit settings (null inherits the default): services/inherited.py.
    require_approval: bool | None
    confirm_destructive: bool | None
    drift_schedule: str | None
    approvers: list[str] | None
    forbid_self_approval: bool | None
    policies: list[str] | None
    pull_requests_from_forks: str | None


@dataclass(frozen=True, slots=True)
class FolderRecord:
    id: str
    org_id: str
    parent_id: str | None
    name: str
    path: str
    created_at: datetime
    require_approval: bool | None
    confirm_destructive: bool | None
    drift_schedule: str | None
    approvers: list[str] | None
    forbid_self_approval: bool | None
    policies: list[str] | None
    pull_requests_from_forks: str | None


@dataclass(frozen=True, slots=True)
class StackRecord:
    id: str
    org_id: str
    folder_id: str | None
    slug: str
    name: str
    repository: str
    branch: str
    path: str
    # Which Git credential is stored ("https_token", "ssh_key"), never the credential; None: none.
    git_auth: str | None
    trigger: StackTrigger
    pull_requests: str
    created_at: datetime
    require_approval: bool | None
    confirm_destructive: bool | None
    drift_schedule: str | None
    approvers: list[str] | None
    forbid_self_approval: bool | None
    policies: list[str] | None
    pull_requests_from_forks: str | None


@dataclass(frozen=True, slots=True)
class DeletedStackRecord:
    """A deleted stack kept for the retention period (services/removal.py), as admins see it."""

    id: str
    deleted_slug: str | None
    name: str
    repository: str
    branch: str
    path: str
    created_at: datetime
    deleted_at: datetime
    deleted_by: str | None


def git_auth(https_token_sealed: object, ssh_key_sealed: object) -> str | None:
    return "https_token" if https_token_sealed else "ssh_key" if ssh_key_sealed else None


_GIT_AUTH = case(
    (Stack.git_https_token_sealed.is_not(None), "https_token"),
    (Stack.git_ssh_key_sealed.is_not(None), "ssh_key"),
    else_=None,
)
ORG_COLUMNS = columns_of(OrganizationRecord, cast(Table, Organization.__table__))
FOLDER_COLUMNS = columns_of(FolderRecord, cast(Table, Folder.__table__))
STACK_COLUMNS = columns_of(StackRecord, cast(Table, Stack.__table__), git_auth=_GIT_AUTH)
DELETED_STACK_COLUMNS = columns_of(DeletedStackRecord, cast(Table, Stack.__table__))


def org_record(org: Organization) -> OrganizationRecord:
    return record_of(OrganizationRecord, org)


def folder_record(folder: Folder) -> FolderRecord:
    return record_of(FolderRecord, folder)


def stack_record(stack: Stack) -> StackRecord:
    """The read model of a stack a change has in hand."""
    return record_of(
        StackRecord, stack, git_auth=git_auth(stack.git_https_token_sealed, stack.git_ssh_key_sealed)
    )


def _grouped(rows: Iterable[Any], key: str, wanted: Sequence[str]) -> list[list[Any]]:
    groups: dict[Any, list[Any]] = defaultdict(list)
    for row in rows:
        groups[getattr(row, key)].append(row)
    return [groups.get(k, []) for k in wanted]


async def _stacks(session: AsyncSession, *where: Any) -> list[StackRecord]:
    rows = await column_rows(session, select(*STACK_COLUMNS).where(*where).order_by(Stack.slug))
    return [StackRecord(*row) for row in rows]


async def _folders(session: AsyncSession, *where: Any) -> list[FolderRecord]:
    rows = await column_rows(session, select(*FOLDER_COLUMNS).where(*where).order_by(Folder.path))
    return [FolderRecord(*row) for row in rows]


async def stacks_by_id(session: AsyncSession, ids: Sequence[str]) -> list[StackRecord | None]:
    found = {s.id: s for s in await _stacks(session, Stack.id.in_(set(ids)))}
    return [found.get(i) for i in ids]


async def folders_by_id(session: AsyncSession, ids: Sequence[str]) -> list[FolderRecord | None]:
    found = {f.id: f for f in await _folders(session, Folder.id.in_(set(ids)))}
    return [found.get(i) for i in ids]


async def folder_paths(session: AsyncSession, stacks: Iterable[StackRecord]) -> dict[str, str]:
    """The folder path of each stack that is in a folder, by folder id."""
    ids = {s.folder_id for s in stacks if s.folder_id}
    if not ids:
        return {}
    rows = await session.execute(select(Folder.id, Folder.path).where(Folder.id.in_(ids)))
    return dict(rows.all())


async def stacks_of_orgs(session: AsyncSession, org_ids: Sequence[str]) -> list[list[StackRecord]]:
    live = Stack.deleted_at.is_(None)
    return _grouped(await _stacks(session, Stack.org_id.in_(set(org_ids)), live), "org_id", org_ids)


async def stacks_in_folders(session: AsyncSession, folder_ids: Sequence[str]) -> list[list[StackRecord]]:
    live = Stack.deleted_at.is_(None)
    return _grouped(
        await _stacks(session, Stack.folder_id.in_(set(folder_ids)), live), "folder_id", folder_ids
    )


async def folders_of_orgs(session: AsyncSession, org_ids: Sequence[str]) -> list[list[FolderRecord]]:
    return _grouped(await _folders(session, Folder.org_id.in_(set(org_ids))), "org_id", org_ids)


async def subfolders(session: AsyncSession, parent_ids: Sequence[str]) -> list[list[FolderRecord]]:
    return _grouped(await _folders(session, Folder.parent_id.in_(set(parent_ids))), "parent_id", parent_ids)


# Built once: a stack's page reads it on every request.
_STACK_BY_SLUG = select(*STACK_COLUMNS).where(
    Stack.org_id == bindparam("org_id"), Stack.slug == bindparam("slug"), Stack.deleted_at.is_(None)
)


async def stack_by_slug(session: AsyncSession, org_id: str, slug: str) -> StackRecord | None:
    rows = await column_rows(session, _STACK_BY_SLUG, {"org_id": org_id, "slug": slug})
    return StackRecord(*rows[0]) if rows else None


async def folder_by_path(session: AsyncSession, org_id: str, path: str) -> FolderRecord | None:
    found = await _folders(session, Folder.org_id == org_id, Folder.path == path.strip("/"))
    return found[0] if found else None


async def deleted_stacks(session: AsyncSession, org_id: str) -> list[DeletedStackRecord]:
    """The organization's deleted stacks not purged yet, most recently deleted first."""
    rows = await column_rows(
        session,
        select(*DELETED_STACK_COLUMNS)
        .where(Stack.org_id == org_id, Stack.deleted_at.is_not(None))
        .order_by(Stack.deleted_at.desc(), Stack.id),
    )
    return [DeletedStackRecord(*row) for row in rows]


async def deleted_stack(
    session: AsyncSession, org_id: str, stack_id: str
) -> tuple[DeletedStackRecord, StackRecord] | None:
    """One deleted stack, as admins see it and as the stack it was (for its runs and state)."""
    if not isinstance(stack_id, str) or len(stack_id) > 64:
        return None
    rows = await column_rows(
        session,
        select(*DELETED_STACK_COLUMNS, *STACK_COLUMNS).where(
            Stack.org_id == org_id, Stack.id == stack_id, Stack.deleted_at.is_not(None)
        ),
    )
    if not rows:
        return None
    split = len(DELETED_STACK_COLUMNS)
    return DeletedStackRecord(*rows[0][:split]), StackRecord(*rows[0][split:])
