"""Each organization's mapping of the identity provider's groups to a role and Firstlume groups,
and its application at every sign-in: the member's role and groups follow the directory, and a
person whose groups map to nothing (and no default role) is no member."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Membership, Organization
from firstlume.db.models_sso import SsoMapping
from firstlume.db.types import utcnow
from firstlume.domain.audit import AuditAction
from firstlume.domain.sso import GroupMapping, mapped_membership
from firstlume.services import audit
from firstlume.services.access.commands import PutSso
from firstlume.services.context import Actor
from firstlume.services.reads.catalog import OrganizationRecord


def mapping_json(groups: dict[str, Any], default_role: str | None) -> dict[str, object]:
    return {"groups": groups, "default_role": default_role}


async def get_mapping(session: AsyncSession, org: OrganizationRecord) -> dict[str, object]:
    row = await session.get(SsoMapping, org.id)
    return mapping_json(row.groups, row.default_role) if row is not None else mapping_json({}, None)


async def put_mapping(session: AsyncSession, org: OrganizationRecord, command: PutSso) -> dict[str, object]:
    groups = {
        name: {"role": entry.role.value, "groups": list(entry.groups)}
        for name, entry in sorted(command.groups.items())
    }
    default_role = command.default_role.value if command.default_role is not None else None
    row = await session.get(SsoMapping, org.id, with_for_update=True)
    if row is None:
        session.add(SsoMapping(org_id=org.id, groups=groups, default_role=default_role))
    else:
        row.groups, row.default_role, row.updated_at = groups, default_role, utcnow()
    await session.flush()
    answer = mapping_json(groups, default_role)
    await audit.record(session, org, AuditAction.SSO_UPDATE, f"organization:{org.slug}", answer)
    return answer


async def apply_at_sign_in(session: AsyncSession, actor: Actor, idp_groups: Sequence[str]) -> list[str]:
    """Sets the person's membership in every organization that has a mapping, from their IdP
    groups; organizations without one keep the memberships their admins gave. Returns the slugs
    of the organizations the person is a member of afterwards (those that map them)."""
    mappings = (
        await session.execute(
            select(SsoMapping, Organization.slug).join(Organization, Organization.id == SsoMapping.org_id)
        )
    ).all()
    member_of: list[str] = []
    for mapping, slug in mappings:
        by_group = {
            name: GroupMapping(entry["role"], tuple(entry.get("groups", ())))
            for name, entry in mapping.groups.items()
        }
        given = mapped_membership(by_group, mapping.default_role, idp_groups)
        membership = await session.scalar(
            select(Membership)
            .where(Membership.org_id == mapping.org_id, Membership.user_id == actor.user_id)
            .with_for_update()
        )
        if given is None:
            if membership is not None:
                await session.execute(delete(Membership).where(Membership.id == membership.id))
                await audit.record(
                    session,
                    mapping.org_id,
                    AuditAction.MEMBER_REMOVE,
                    f"member:{actor.email}",
                    {"by": "single sign-on"},
                    actor=actor,
                )
            continue
        member_of.append(slug)
        groups = list(given.groups)
        if membership is None:
            session.add(
                Membership(org_id=mapping.org_id, user_id=actor.user_id, role=given.role, groups=groups)
            )
        elif membership.role == given.role and list(membership.groups or []) == groups:
            continue
        else:
            membership.role, membership.groups = given.role, groups
        await session.flush()
        await audit.record(
            session,
            mapping.org_id,
            AuditAction.MEMBER_UPDATE,
            f"member:{actor.email}",
            {"role": given.role, "groups": groups, "by": "single sign-on"},
            actor=actor,
        )
    return member_of
