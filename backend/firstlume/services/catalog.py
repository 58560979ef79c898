"""Folders and stacks: found by path or slug (NotFound otherwise), created and changed. What
these hand to their callers are read models (services/reads/catalog.py)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import KeyRing
from firstlume.db.models import Folder, Run, Stack
from firstlume.domain.audit import AuditAction
from firstlume.domain.errors import AlreadyExists, InvalidRequest, NotFound, StackBusy
from firstlume.domain.git import PullRequestMode, StackTrigger
from firstlume.domain.runs import RUNNING, RunStatus
from firstlume.services import audit
from firstlume.services.commands import CreateFolder, CreateStack, MoveFolder, UpdateStack
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
    if await session.scalar(
        select(Stack.id).where(Stack.org_id == org.id, Stack.slug == slug, Stack.deleted_at.is_(None))
    ):
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
        pull_requests=command.pull_requests or PullRequestMode.OFF,
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


_STACK_TO_CHANGE = (
    select(Stack)
    .where(Stack.org_id == bindparam("org_id"), Stack.slug == bindparam("slug"), Stack.deleted_at.is_(None))
    .with_for_update()
)


async def stack_to_change(session: AsyncSession, org: OrganizationRecord, slug: str) -> Stack:
    """The live stack `slug`, its row locked (a run's start takes the same lock)."""
    stack = await session.scalar(_STACK_TO_CHANGE, {"org_id": org.id, "slug": slug})
    if stack is None:
        raise NotFound(f"No stack '{slug}'.")
    return stack


async def running_runs(session: AsyncSession, stack_id: str, statuses: Iterable[RunStatus]) -> list[Run]:
    return list(
        await session.scalars(
            select(Run).where(Run.stack_id == stack_id, Run.status.in_(list(statuses))).order_by(Run.number)
        )
    )


def described_runs(runs: Iterable[Run]) -> str:
    return ", ".join(f"#{r.number} ({RunStatus(r.status).value})" for r in runs)


async def update_stack(
    session: AsyncSession, keyring: KeyRing, org: OrganizationRecord, slug: str, command: UpdateStack
) -> tuple[StackRecord, bool]:
    """Changes the fields given of the stack `slug`. Returns the stack as changed, and whether it
    now needs a new baseline head: its trigger was switched on, or a triggered stack follows
    another repository or branch (only commits after the baseline start runs)."""
    stack = await stack_to_change(session, org, slug)
    given = command.model_fields_set
    details: dict[str, object] = {
        name: audit.without_credentials(value) if name == "repository" else value
        for name, value in command.model_dump(
            include=given - {"folder", *UpdateStack.CREDENTIALS}, mode="json"
        ).items()
    }
    if "slug" in given and command.slug != stack.slug:
        await _rename(session, org, stack, command.slug or stack.slug)
        details["renamed_from"] = slug
    if "folder" in given:
        stack.folder_id = None
        if command.folder is not None:
            stack.folder_id = (await ensure_folder(session, org, CreateFolder(path=command.folder)))[0].id
        details["folder"] = command.folder
    credentials = {}
    for name in (n for n in UpdateStack.CREDENTIALS if n in given):
        value = getattr(command, name)
        sealed = None if value is None else keyring.encrypt_text(value, f"stack-git:{stack.id}")
        setattr(stack, f"{name}_sealed", sealed)
        # Named as `git_auth` names them: the field's own name is a secret's (domain/audit.py).
        credentials[name.removeprefix("git_")] = "removed" if value is None else "replaced"
    if credentials:
        details["credentials"] = credentials
    was_on = stack.trigger != StackTrigger.MANUAL
    followed = (stack.repository, stack.branch)
    for name in given & {"name", "repository", "branch", "path", "trigger", "pull_requests"}:
        setattr(stack, name, getattr(command, name))
    is_on = stack.trigger != StackTrigger.MANUAL
    rebase = is_on and (not was_on or (stack.repository, stack.branch) != followed)
    if rebase or not is_on:
        stack.git_seen_commit = None
    await session.flush()
    await audit.record(session, stack, AuditAction.STACK_UPDATE, f"stack:{stack.slug}", details)
    return stack_record(stack), rebase


async def _rename(session: AsyncSession, org: OrganizationRecord, stack: Stack, slug: str) -> None:
    """A new slug, unless another live stack has it or a phase is running: its executor reaches the
    stack's managed state by the slug it was given (the next phase gets the new one)."""
    taken = await session.scalar(
        select(Stack.id).where(Stack.org_id == org.id, Stack.slug == slug, Stack.id != stack.id)
    )
    if taken:
        raise AlreadyExists(f"A stack '{slug}' already exists in this organization.", field="slug")
    running = await running_runs(session, stack.id, RUNNING)
    if running:
        raise StackBusy(
            f"Stack '{stack.slug}' cannot be renamed while run {described_runs(running)} is running: "
            "its executor reaches the stack's state by the current name. Try again when it has finished.",
            runs=[r.id for r in running],
        )
    stack.slug = slug


def stack_fields(stack: Stack, command: CreateStack) -> dict[str, object]:
    """A stack as its audit row shows it: credentials by name only, and none in the URL."""
    return {
        "name": stack.name,
        "repository": audit.without_credentials(stack.repository),
        "branch": stack.branch,
        "path": stack.path,
        "pull_requests": stack.pull_requests,
        "folder": command.folder,
        "credentials": [
            name for name in ("git_https_token", "git_ssh_key") if getattr(command, name) is not None
        ],
    }


async def move_folder(
    session: AsyncSession, org: OrganizationRecord, path: str, command: MoveFolder
) -> FolderRecord:
    """Renames or moves the folder `path` to `command.path`, with its subfolders and stacks (they
    follow it by id: settings, variables and notification destinations stay theirs)."""
    folder = await session.scalar(
        select(Folder).where(Folder.org_id == org.id, Folder.path == path.strip("/")).with_for_update()
    )
    if folder is None:
        raise NotFound(f"No folder '{path}'.")
    old, new = folder.path, command.path
    if new == old:
        return folder_record(folder)
    if new.startswith(old + "/"):
        raise InvalidRequest(f"Folder '{old}' cannot move into itself ('{new}').", field="path")
    if await session.scalar(select(Folder.id).where(Folder.org_id == org.id, Folder.path == new)):
        raise AlreadyExists(f"A folder '{new}' already exists in this organization.", field="path")
    parent_path, _, name = new.rpartition("/")
    parent = (await ensure_folder(session, org, CreateFolder(path=parent_path)))[0] if parent_path else None
    inside = await session.scalars(
        select(Folder).where(Folder.org_id == org.id, Folder.path.startswith(old + "/", autoescape=True))
    )
    for child in inside:
        child.path = new + child.path[len(old) :]
    folder.path, folder.name, folder.parent_id = new, name, parent.id if parent else None
    await session.flush()
    await audit.record(session, org, AuditAction.FOLDER_UPDATE, f"folder:{new}", {"path": new, "was": old})
    return folder_record(folder)
