"""Roles per folder: a grant gives a member (user:<email>) or a group (group:<name>) a role on a
folder and everything under it. It raises the member's organization role there, never lowers
it: the organization role stays the floor. A stack's effective role for the caller is what the
permission checks of stack-scoped actions (start, approve, discard, cancel a run) read, and what
reads of stacks show as `viewer_role`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Folder, Membership, Organization, Run, Stack, User
from firstlume.db.models_sso import FolderGrant
from firstlume.domain.audit import AuditAction
from firstlume.domain.errors import InvalidRequest, NotFound
from firstlume.domain.sso import covers, effective_role
from firstlume.services import audit
from firstlume.services.access.roles import Role, RoleRequired, parse_role
from firstlume.services.commands import GROUP_NAME
from firstlume.services.reads.catalog import OrganizationRecord, StackRecord

MAX_GRANTS = 200


@dataclass(frozen=True)
class Caller:
    """What a member's effective roles are computed from."""

    role: str
    grants: list[tuple[str, str]]  # (folder path, role) of the grants that name them


def _principals(email: str, groups: Iterable[str]) -> list[str]:
    return [f"user:{email}", *(f"group:{g}" for g in groups)]


async def caller_in(session: AsyncSession, org_id: str, user_id: str) -> Caller | None:
    """The member's organization role and the grants that name them or one of their groups."""
    found = (
        await session.execute(
            select(Membership.role, Membership.groups, User.email)
            .join(User, User.id == Membership.user_id)
            .where(Membership.org_id == org_id, Membership.user_id == user_id)
        )
    ).first()
    if found is None:
        return None
    role, groups, email = found
    rows = await session.execute(
        select(Folder.path, FolderGrant.role)
        .join(Folder, Folder.id == FolderGrant.folder_id)
        .where(FolderGrant.org_id == org_id, FolderGrant.principal.in_(_principals(email, groups or [])))
    )
    return Caller(role=str(role), grants=[(str(p), str(r)) for p, r in rows])


async def _folder_path(session: AsyncSession, folder_id: str | None) -> str | None:
    if folder_id is None:
        return None
    return await session.scalar(select(Folder.path).where(Folder.id == folder_id))


async def require_on_stack(
    session: AsyncSession, org_id: str, user_id: str, folder_id: str | None, need: Role
) -> Role:
    """The caller's effective role on a stack in `folder_id`, or RoleRequired naming it."""
    caller = await caller_in(session, org_id, user_id)
    if caller is None:
        raise NotFound("No such organization.")
    role = Role(effective_role(caller.role, caller.grants, await _folder_path(session, folder_id)))
    if not role.allows(need):
        raise RoleRequired.of(need, role)
    return role


async def require_on_run(session: AsyncSession, org_id: str, user_id: str, run_id: str, need: Role) -> None:
    """require_on_stack for the stack of a run (a run that is not found is the action's 404)."""
    folder = (
        await session.execute(
            select(Stack.folder_id)
            .join(Run, Run.stack_id == Stack.id)
            .where(Run.id == run_id, Run.org_id == org_id)
        )
        if isinstance(run_id, str) and len(run_id) <= 64
        else None
    )
    row = folder.first() if folder is not None else None
    if row is None:
        # No such run: the org-level check decides, and the action answers 404.
        caller = await caller_in(session, org_id, user_id)
        if caller is not None and not Role(caller.role).allows(need) and not caller.grants:
            raise RoleRequired.of(need, Role(caller.role))
        return
    await require_on_stack(session, org_id, user_id, row[0], need)


async def require_on_stack_slug(
    session: AsyncSession, org_id: str, user_id: str, stack_slug: str, need: Role
) -> None:
    folder = (
        await session.execute(
            select(Stack.folder_id).where(
                Stack.org_id == org_id, Stack.slug == stack_slug, Stack.deleted_at.is_(None)
            )
        )
    ).first()
    if folder is None:
        caller = await caller_in(session, org_id, user_id)
        if caller is not None and not Role(caller.role).allows(need) and not caller.grants:
            raise RoleRequired.of(need, Role(caller.role))
        return
    await require_on_stack(session, org_id, user_id, folder[0], need)


async def viewer_roles(
    session: AsyncSession, org_id: str, user_id: str, stacks: Sequence[StackRecord], paths: dict[str, str]
) -> dict[str, str]:
    """Each stack's effective role for the caller, by stack id (one query for all of them)."""
    caller = await caller_in(session, org_id, user_id)
    if caller is None:
        return {}
    return {
        s.id: effective_role(caller.role, caller.grants, paths.get(s.folder_id) if s.folder_id else None)
        for s in stacks
    }


# -- the grants of a folder ------------------------------------------------------------------


def _parse_grants(body: object) -> dict[str, str]:
    if not isinstance(body, dict) or set(body) != {"grants"} or not isinstance(body["grants"], dict):
        raise InvalidRequest(
            'The body must be {"grants": {"group:<name>" or "user:<email>": "reader", "operator" or "admin"}}.',
            field="grants",
        )
    grants: dict[str, str] = {}
    if len(body["grants"]) > MAX_GRANTS:
        raise InvalidRequest(f"A folder takes at most {MAX_GRANTS} grants.", field="grants")
    for principal, role in body["grants"].items():
        kind, _, name = principal.partition(":")
        valid = (kind == "group" and GROUP_NAME.match(name)) or (
            kind == "user" and "@" in name and len(name) <= 320 and name.strip() == name
        )
        if not valid:
            raise InvalidRequest(
                f'A grant names "group:<name>" or "user:<email>"; got {principal!r}.', field="grants"
            )
        grants[principal] = parse_role(role, "grants").value
    return dict(sorted(grants.items()))


async def _folder(session: AsyncSession, org: OrganizationRecord, path: str) -> Folder:
    folder = await session.scalar(
        select(Folder).where(Folder.org_id == org.id, Folder.path == path.strip("/"))
    )
    if folder is None:
        raise NotFound(f"No folder '{path}'.")
    return folder


async def get_grants(session: AsyncSession, org: OrganizationRecord, path: str) -> dict[str, object]:
    """The folder's own grants, and every grant that reaches it (its own and those of the
    folders above it), each with its origin."""
    folder = await _folder(session, org, path)
    rows = await session.execute(
        select(Folder.path, FolderGrant.principal, FolderGrant.role)
        .join(Folder, Folder.id == FolderGrant.folder_id)
        .where(FolderGrant.org_id == org.id)
        .order_by(Folder.path, FolderGrant.principal)
    )
    reaching = [(p, who, role) for p, who, role in rows if covers(p, folder.path)]
    return {
        "path": folder.path,
        "grants": {who: role for p, who, role in reaching if p == folder.path},
        "effective": [{"principal": who, "role": role, "origin": p} for p, who, role in reaching],
    }


async def put_grants(
    session: AsyncSession, org: OrganizationRecord, path: str, body: object
) -> dict[str, object]:
    """Replaces the folder's grants (audited)."""
    grants = _parse_grants(body)
    folder = await _folder(session, org, path)
    await session.execute(delete(FolderGrant).where(FolderGrant.folder_id == folder.id))
    for principal, role in grants.items():
        session.add(FolderGrant(org_id=org.id, folder_id=folder.id, principal=principal, role=role))
    await session.flush()
    await audit.record(
        session, org, AuditAction.FOLDER_GRANTS_UPDATE, f"folder:{folder.path}", {"grants": grants}
    )
    return await get_grants(session, org, folder.path)


async def raised_on_stack(
    session: AsyncSession, org_id: str, user_id: str, stack_id: str, role: str | None
) -> str | None:
    """`role` (the organization role; None: no member) raised by the grants that reach the stack."""
    if role is None or role == Role.ADMIN.value:
        return role
    caller = await caller_in(session, org_id, user_id)
    if caller is None or not caller.grants:
        return role
    folder_id = await session.scalar(select(Stack.folder_id).where(Stack.id == stack_id))
    return effective_role(role, caller.grants, await _folder_path(session, folder_id))


async def require_in_org(
    session: AsyncSession,
    org_slug: str,
    user_id: str,
    need: Role,
    *,
    stack_slug: str | None = None,
    run_id: str | None = None,
) -> None:
    """GraphQL's stack-scoped check: the caller's effective role on the stack (by slug) or the
    run's stack (by id) of the organization `org_slug`."""
    org_id = await session.scalar(select(Organization.id).where(Organization.slug == org_slug))
    if org_id is None:
        raise NotFound(f"No organization '{org_slug}'.")
    if stack_slug is not None:
        await require_on_stack_slug(session, org_id, user_id, stack_slug, need)
    elif run_id is not None:
        await require_on_run(session, org_id, user_id, run_id, need)


def role_on(caller: Caller | None, stack_folder: str | None) -> str | None:
    """The effective role on a stack in `stack_folder` of a caller read with caller_in."""
    return effective_role(caller.role, caller.grants, stack_folder) if caller is not None else None
