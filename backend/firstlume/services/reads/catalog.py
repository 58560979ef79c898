"""Reads of folders and stacks, by id, by organization, by parent folder, by slug or path."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Folder, Stack


def _grouped(rows: Iterable[Any], key: str, wanted: Sequence[str]) -> list[list[Any]]:
    groups: dict[Any, list[Any]] = defaultdict(list)
    for row in rows:
        groups[getattr(row, key)].append(row)
    return [groups.get(k, []) for k in wanted]


async def stacks_by_id(session: AsyncSession, ids: Sequence[str]) -> list[Stack | None]:
    found = {s.id: s for s in await session.scalars(select(Stack).where(Stack.id.in_(set(ids))))}
    return [found.get(i) for i in ids]


async def folders_by_id(session: AsyncSession, ids: Sequence[str]) -> list[Folder | None]:
    found = {f.id: f for f in await session.scalars(select(Folder).where(Folder.id.in_(set(ids))))}
    return [found.get(i) for i in ids]


async def folder_paths(session: AsyncSession, stacks: Iterable[Stack]) -> dict[str, str]:
    """The folder path of each stack that is in a folder, by folder id."""
    ids = {s.folder_id for s in stacks if s.folder_id}
    if not ids:
        return {}
    rows = await session.execute(select(Folder.id, Folder.path).where(Folder.id.in_(ids)))
    return dict(rows.all())


async def stacks_of_orgs(session: AsyncSession, org_ids: Sequence[str]) -> list[list[Stack]]:
    rows = await session.scalars(select(Stack).where(Stack.org_id.in_(set(org_ids))).order_by(Stack.slug))
    return _grouped(rows, "org_id", org_ids)


async def stacks_in_folders(session: AsyncSession, folder_ids: Sequence[str]) -> list[list[Stack]]:
    rows = await session.scalars(
        select(Stack).where(Stack.folder_id.in_(set(folder_ids))).order_by(Stack.slug)
    )
    return _grouped(rows, "folder_id", folder_ids)


async def folders_of_orgs(session: AsyncSession, org_ids: Sequence[str]) -> list[list[Folder]]:
    rows = await session.scalars(select(Folder).where(Folder.org_id.in_(set(org_ids))).order_by(Folder.path))
    return _grouped(rows, "org_id", org_ids)


async def subfolders(session: AsyncSession, parent_ids: Sequence[str]) -> list[list[Folder]]:
    rows = await session.scalars(
        select(Folder).where(Folder.parent_id.in_(set(parent_ids))).order_by(Folder.path)
    )
    return _grouped(rows, "parent_id", parent_ids)


# Built once: a stack's page reads it on every request.
_STACK_BY_SLUG = select(Stack).where(Stack.org_id == bindparam("org_id"), Stack.slug == bindparam("slug"))


async def stack_by_slug(session: AsyncSession, org_id: str, slug: str) -> Stack | None:
    return await session.scalar(_STACK_BY_SLUG, {"org_id": org_id, "slug": slug})


async def folder_by_path(session: AsyncSession, org_id: str, path: str) -> Folder | None:
    return await session.scalar(select(Folder).where(Folder.org_id == org_id, Folder.path == path.strip("/")))
