"""Folders and stacks: found by path or slug (NotFound otherwise), created and changed. What
these hand to their callers are read models (services/reads/catalog.py)."""

from __future__ import annotations

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import KeyRing
from firstlume.db.models import Folder, Stack
from firstlume.domain.audit import AuditAction
from firstlume.domain.errors import AlreadyExists, NotFound
from firstlume.domain.git import StackTrigger
from firstlume.services import audit
from firstlume.services.commands import CreateFolder, CreateStack, UpdateStack
from firstlume.services.reads import catalog as catalog_reads
from firstlume.services.reads.catalog import (
    FolderRecord,
    OrganizationRecord,
    StackRecord,
    folder_record,
    stack_record,
)


def path_prefixes(path: str) -> list[str]:
    """A folder path and its ancestors' paths, outermost first: "a/b" → ["a", "a/b"]."""
    segments = path.split("/")
    return ["/".join(segments[: i + 1]) for i in range(len(segments))]


async def folder_by_path(session: AsyncSession, org: OrganizationRecord, path: str) -> FolderRecord:
    folder = await catalog_reads.folder_by_path(session, org.id, path)
    if folder is None:
        raise NotFound(f"No folder '{path}'.")
    return folder


async def ensure_folder(
    session: AsyncSession, org: OrganizationRecord, command: CreateFolder
) -> tuple[FolderRecord, bool]:
    """Creates the folder and any missing parents; returns it and whether it was new."""
    path = command.path
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
            await audit.record(session, org, AuditAction.FOLDER_CREATE, f"folder:{prefix}")
            created = True
        parent = folder
    assert parent is not None
    return folder_record(parent), created


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


async def stack_by_slug(session: AsyncSession, org: OrganizationRecord, slug: str) -> StackRecord:
    stack = await catalog_reads.stack_by_slug(session, org.id, slug)
    if stack is None:
        raise NotFound(f"No stack '{slug}'.")
    return stack


async def create_stack(
    session: AsyncSession, keyring: KeyRing, org: OrganizationRecord, command: CreateStack
) -> StackRecord:
    slug = command.slug
    if await session.scalar(select(Stack.id).where(Stack.org_id == org.id, Stack.slug == slug)):
        raise AlreadyExists(f"A stack '{slug}' already exists in this organization.", field="slug")
    folder_id = None
    if command.folder is not None:
        folder, _ = await ensure_folder(session, org, CreateFolder(path=command.folder))
        folder_id = folder.id
    stack = Stack(
        org_id=org.id,
        folder_id=folder_id,
        slug=slug,
        name=command.name or slug,
        repository=command.repository,
        branch=command.branch or "main",
        path=command.path or ".",
        trigger=command.trigger or StackTrigger.MANUAL,
    )
    session.add(stack)
    await session.flush()
    git_context = f"stack-git:{stack.id}"
    if command.git_https_token is not None:
        stack.git_https_token_sealed = keyring.encrypt_text(command.git_https_token, git_context)
    if command.git_ssh_key is not None:
        stack.git_ssh_key_sealed = keyring.encrypt_text(command.git_ssh_key, git_context)
    await session.flush()
    await audit.record(
        session, stack, AuditAction.STACK_CREATE, f"stack:{slug}", stack_fields(stack, command)
    )
    return stack_record(stack)


_STACK_TO_CHANGE = select(Stack).where(Stack.org_id == bindparam("org_id"), Stack.slug == bindparam("slug"))


async def update_stack(
    session: AsyncSession, org: OrganizationRecord, slug: str, command: UpdateStack
) -> tuple[StackRecord, bool]:
    """Changes the fields given of the stack `slug`. Returns the stack as changed, and whether it
    now needs a new baseline head: its trigger was switched on, or a triggered stack follows
    another repository or branch (only commits after the baseline start runs)."""
    stack = await session.scalar(_STACK_TO_CHANGE, {"org_id": org.id, "slug": slug})
    if stack is None:
        raise NotFound(f"No stack '{slug}'.")
    was_on = stack.trigger != StackTrigger.MANUAL
    followed = (stack.repository, stack.branch)
    for name in command.model_fields_set:
        setattr(stack, name, getattr(command, name))
    is_on = stack.trigger != StackTrigger.MANUAL
    rebase = is_on and (not was_on or (stack.repository, stack.branch) != followed)
    if rebase or not is_on:
        stack.git_seen_commit = None
    await session.flush()
    await audit.record(
        session,
        stack,
        AuditAction.STACK_UPDATE,
        f"stack:{stack.slug}",
        {
            name: audit.without_credentials(value) if name == "repository" else value
            for name, value in command.model_dump(include=command.model_fields_set, mode="json").items()
        },
        stack=stack.slug,
    )
    return stack_record(stack), rebase


def stack_fields(stack: Stack, command: CreateStack) -> dict[str, object]:
    """A stack as its audit row shows it: credentials by name only, and none in the URL."""
    return {
        "name": stack.name,
        "repository": audit.without_credentials(stack.repository),
        "branch": stack.branch,
        "path": stack.path,
        "folder": command.folder,
        "credentials": [
            name for name in ("git_https_token", "git_ssh_key") if getattr(command, name) is not None
        ],
    }
