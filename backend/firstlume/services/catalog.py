"""Folders and stacks."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import KeyRing
from firstlume.db.models import Folder, Organization, Stack
from firstlume.domain.errors import AlreadyExists, InvalidRequest, NotFound
from firstlume.services.validation import (
    require_folder_path,
    require_relative_path,
    require_slug,
    require_str,
)

STACK_FIELDS = {"slug", "name", "folder", "repository", "branch", "path", "git_https_token", "git_ssh_key"}


def path_prefixes(path: str) -> list[str]:
    """A folder path and its ancestors' paths, outermost first: "a/b" → ["a", "a/b"]."""
    segments = path.split("/")
    return ["/".join(segments[: i + 1]) for i in range(len(segments))]


async def folder_by_path(session: AsyncSession, org: Organization, path: str) -> Folder:
    folder = await session.scalar(select(Folder).where(Folder.org_id == org.id, Folder.path == path))
    if folder is None:
        raise NotFound(f"No folder '{path}'.")
    return folder


async def ensure_folder(session: AsyncSession, org: Organization, path: str) -> tuple[Folder, bool]:
    """Creates the folder and any missing parents; returns it and whether it was new."""
    path = require_folder_path("path", path)
    segments = path.split("/")
    wanted = path_prefixes(path)
    existing = {
        f.path: f
        for f in await session.scalars(select(Folder).where(Folder.org_id == org.id, Folder.path.in_(wanted)))
    }
    parent: Folder | None = None
    created = False
    for segment, prefix in zip(segments, wanted, strict=True):
        folder = existing.get(prefix)
        if folder is None:
            folder = Folder(org_id=org.id, parent_id=parent.id if parent else None, name=segment, path=prefix)
            session.add(folder)
            await session.flush()
            created = True
        parent = folder
    assert parent is not None
    return parent, created


async def folder_chain(session: AsyncSession, folder_id: str | None) -> list[Folder]:
    """The folder and its ancestors, outermost first."""
    if folder_id is None:
        return []
    folder = await session.get(Folder, folder_id)
    if folder is None:
        return []
    prefixes = path_prefixes(folder.path)
    rows = await session.scalars(
        select(Folder).where(Folder.org_id == folder.org_id, Folder.path.in_(prefixes))
    )
    return sorted(rows, key=lambda f: f.path.count("/"))


async def stack_by_slug(session: AsyncSession, org: Organization, slug: str) -> Stack:
    stack = await session.scalar(select(Stack).where(Stack.org_id == org.id, Stack.slug == slug))
    if stack is None:
        raise NotFound(f"No stack '{slug}'.")
    return stack


async def create_stack(
    session: AsyncSession, keyring: KeyRing, org: Organization, body: dict[str, Any]
) -> Stack:
    unknown = sorted(set(body) - STACK_FIELDS)
    if unknown:
        raise InvalidRequest(
            f"Unknown field '{unknown[0]}'; a stack takes {', '.join(sorted(STACK_FIELDS))}.",
            field=unknown[0],
        )
    slug = require_slug("slug", body.get("slug"))
    repository = require_str("repository", body.get("repository"))
    name = require_str("name", body.get("name", slug), max_length=200)
    branch = require_str("branch", body.get("branch", "main"), max_length=255)
    path = require_relative_path("path", body.get("path", "."))
    if await session.scalar(select(Stack.id).where(Stack.org_id == org.id, Stack.slug == slug)):
        raise AlreadyExists(f"A stack '{slug}' already exists in this organization.", field="slug")
    folder_id = None
    if body.get("folder") is not None:
        folder, _ = await ensure_folder(session, org, require_folder_path("folder", body["folder"]))
        folder_id = folder.id
    stack = Stack(
        org_id=org.id,
        folder_id=folder_id,
        slug=slug,
        name=name,
        repository=repository,
        branch=branch,
        path=path,
    )
    session.add(stack)
    await session.flush()
    if body.get("git_https_token") is not None:
        token = require_str("git_https_token", body["git_https_token"])
        stack.git_https_token_sealed = keyring.encrypt_text(token, f"stack-git:{stack.id}")
    if body.get("git_ssh_key") is not None:
        key = require_str("git_ssh_key", body["git_ssh_key"], max_length=20000)
        stack.git_ssh_key_sealed = keyring.encrypt_text(key, f"stack-git:{stack.id}")
    await session.flush()
    return stack
