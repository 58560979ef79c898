"""Members of an organization: their roles and groups."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Membership, Organization, User
from firstlume.domain.audit import AuditAction
from firstlume.domain.errors import Conflict, NotFound
from firstlume.services import audit
from firstlume.services.access.commands import PutMember
from firstlume.services.access.roles import ORDER, Role
from firstlume.services.accounts import ensure_user
from firstlume.services.reads.catalog import OrganizationRecord


class LastAdmin(Conflict):
    code = "last_admin"


@dataclass(frozen=True)
class Member:
    email: str
    role: str
    groups: list[str]


def member_json(member: Member) -> dict[str, object]:
    return {"email": member.email, "role": member.role, "groups": list(member.groups)}


async def role_in(
    session: AsyncSession, user_id: str, *, slug: str | None = None, org_id: str | None = None
) -> str | None:
    """The user's role in the organization (by slug or id); None when not a member."""
    query = (
        select(Membership.role)
        .join(Organization, Organization.id == Membership.org_id)
        .where(Membership.user_id == user_id)
    )
    query = (
        query.where(Organization.slug == slug) if slug is not None else query.where(Organization.id == org_id)
    )
    role = await session.scalar(query)
    return str(role) if role is not None else None


async def list_members(session: AsyncSession, org_id: str) -> list[Member]:
    rows = await session.execute(
        select(User.email, Membership.role, Membership.groups)
        .join(Membership, Membership.user_id == User.id)
        .where(Membership.org_id == org_id)
        .order_by(User.email)
    )
    return [Member(email=e, role=r, groups=list(g or [])) for e, r, g in rows]


async def _membership(session: AsyncSession, org: OrganizationRecord, email: str) -> Membership | None:
    return await session.scalar(
        select(Membership)
        .join(User, User.id == Membership.user_id)
        .where(Membership.org_id == org.id, User.email == email)
        .with_for_update()
    )


async def _admins(session: AsyncSession, org: OrganizationRecord) -> int:
    return int(
        await session.scalar(
            select(func.count())
            .select_from(Membership)
            .where(Membership.org_id == org.id, Membership.role == Role.ADMIN.value)
        )
        or 0
    )


async def put_member(
    session: AsyncSession, org: OrganizationRecord, email: str, command: PutMember
) -> Member:
    """Adds the person (by email) with the role and groups, or changes an existing member's."""
    membership = await _membership(session, org, email)
    if membership is None:
        user = await ensure_user(session, email)
        membership = Membership(
            org_id=org.id, user_id=user.id, role=command.role.value, groups=command.groups
        )
        session.add(membership)
    else:
        if (
            membership.role == Role.ADMIN.value
            and command.role != Role.ADMIN
            and await _admins(session, org) <= 1
        ):
            raise LastAdmin(f"{email} is the organization's last admin; make another member admin first.")
        membership.role = command.role.value
        membership.groups = list(command.groups)
    await session.flush()
    await audit.record(
        session,
        org,
        AuditAction.MEMBER_UPDATE,
        f"member:{email}",
        {"role": membership.role, "groups": list(membership.groups)},
    )
    return Member(email=email, role=membership.role, groups=list(membership.groups))


async def remove_member(session: AsyncSession, org: OrganizationRecord, email: str) -> None:
    membership = await _membership(session, org, email)
    if membership is None:
        raise NotFound(f"{email} is not a member of this organization.")
    if membership.role == Role.ADMIN.value and await _admins(session, org) <= 1:
        raise LastAdmin(f"{email} is the organization's last admin; make another member admin first.")
    await session.delete(membership)
    await session.flush()
    await audit.record(session, org, AuditAction.MEMBER_REMOVE, f"member:{email}")


ROLES = [r.value for r in ORDER]
