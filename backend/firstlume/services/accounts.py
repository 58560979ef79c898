"""Organizations, users, memberships and API tokens."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BindParameter, ColumnElement, Row, Select, and_, bindparam, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import hash_token, new_token
from firstlume.db.models import ApiToken, Membership, Organization, Stack, User
from firstlume.db.types import utcnow
from firstlume.domain.audit import AuditAction
from firstlume.domain.errors import AlreadyExists, InvalidRequest, NotFound, Unauthenticated
from firstlume.services import audit
from firstlume.services.access.permissions import Need
from firstlume.services.access.roles import Role, check_role
from firstlume.services.context import Actor
from firstlume.services.reads.catalog import (
    ORG_COLUMNS,
    STACK_COLUMNS,
    OrganizationRecord,
    StackRecord,
    org_record,
)
from firstlume.services.reads.rows import column_rows
from firstlume.services.validation import require_slug, require_str

_ORG = len(ORG_COLUMNS)


async def create_org(session: AsyncSession, slug: str, name: str | None = None) -> OrganizationRecord:
    require_slug("slug", slug)
    if await session.scalar(select(Organization.id).where(Organization.slug == slug)):
        raise AlreadyExists(f"An organization '{slug}' already exists.")
    org = Organization(slug=slug, name=name or slug)
    session.add(org)
    await session.flush()
    await audit.record(
        session, org.id, AuditAction.ORGANIZATION_CREATE, f"organization:{slug}", {"name": org.name}
    )
    return org_record(org)


async def ensure_user(session: AsyncSession, email: str) -> User:
    require_str("email", email, max_length=320)
    if "@" not in email:
        raise InvalidRequest(f"'{email}' is not an email address.", field="email")
    user = await session.scalar(select(User).where(User.email == email))
    if user is None:
        user = User(email=email)
        session.add(user)
        await session.flush()
    return user


async def ensure_membership(
    session: AsyncSession, org: Organization, user: User, role: Role | None = None
) -> Membership:
    """The user's membership, created when missing: with `role`, or admin for an organization's
    first member and reader for the others. An existing member's role changes only when given."""
    membership = await session.scalar(
        select(Membership).where(Membership.org_id == org.id, Membership.user_id == user.id)
    )
    if membership is None:
        if role is None:
            has_members = await session.scalar(
                select(Membership.id).where(Membership.org_id == org.id).limit(1)
            )
            role = Role.READER if has_members else Role.ADMIN
        membership = Membership(org_id=org.id, user_id=user.id, role=role.value, groups=[])
        session.add(membership)
        await session.flush()
    elif role is not None:
        membership.role = role.value
    return membership


async def create_token(
    session: AsyncSession,
    org_slug: str,
    email: str,
    name: str = "",
    *,
    role: Role | None = None,
    expires_at: datetime | None = None,
) -> str:
    """Creates the user and membership when needed; returns the token, which is stored only hashed."""
    org = await session.scalar(select(Organization).where(Organization.slug == org_slug))
    if org is None:
        raise NotFound(f"No organization '{org_slug}'.")
    user = await ensure_user(session, email)
    await ensure_membership(session, org, user, role)
    token = new_token("fl")
    row = ApiToken(user_id=user.id, token_hash=hash_token(token), name=name, expires_at=expires_at)
    session.add(row)
    await session.flush()
    await audit.record(
        session, org.id, AuditAction.TOKEN_CREATE, f"token:{row.id}", {"user": email, "name": name}
    )
    return token


INVALID_TOKEN = "The API token is not valid (unknown, revoked or expired)."


def _usable(now: datetime | BindParameter[datetime]) -> ColumnElement[bool]:
    """A token not revoked and not expired: refused from the moment either happens."""
    return and_(ApiToken.revoked_at.is_(None), or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > now))


# Statements that run on every request are built once: building one (and working out its
# cache key) costs SQLAlchemy about as much as running it.
_ACTOR = (
    select(User.id, User.email, ApiToken.id, ApiToken.last_used_at)
    .join(ApiToken, ApiToken.user_id == User.id)
    .where(ApiToken.token_hash == bindparam("token_hash"), _usable(bindparam("now")))
)


async def authenticate(session: AsyncSession, token: str | None) -> Actor:
    if not token:
        raise Unauthenticated("Send an API token: 'Authorization: Bearer <token>'.")
    # On the connection: a select of columns needs none of the ORM's handling of a statement
    # (about a third of this one's cost in the session's hands, for every GraphQL request).
    connection = await session.connection()
    row = (await connection.execute(_ACTOR, {"token_hash": hash_token(token), "now": utcnow()})).first()
    if row is None:
        raise Unauthenticated(INVALID_TOKEN)
    return Actor(user_id=row[0], email=row[1], token_id=row[2], token_last_used_at=row[3])


# The caller, their token, their role and groups and, if they are a member, the organization:
# built once, it runs on every request.
_ACTOR_IN_ORG = (
    select(
        User.id,
        User.email,
        ApiToken.id,
        ApiToken.last_used_at,
        Membership.role,
        Membership.groups,
        *ORG_COLUMNS,
    )
    .select_from(ApiToken)
    .join(User, User.id == ApiToken.user_id)
    .outerjoin(
        Membership,
        (Membership.user_id == User.id)
        & (
            Membership.org_id
            == select(Organization.id).where(Organization.slug == bindparam("slug")).scalar_subquery()
        ),
    )
    .outerjoin(Organization, Organization.id == Membership.org_id)
    .where(
        ApiToken.token_hash == bindparam("token_hash"),
        ApiToken.revoked_at.is_(None),
        or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > bindparam("now")),
    )
)


async def authenticate_in_org(
    session: AsyncSession, token: str | None, slug: str, need: Need
) -> tuple[Actor, OrganizationRecord]:
    """authenticate, org_for and the permission check, in one statement: the start of every REST
    request in an organization. `need` comes from the permission table (services/access)."""
    row = await _caller_row(session, _ACTOR_IN_ORG, token, {"slug": slug})
    return _caller_in_org(session, row, slug, need)


# The same, and the stack named in the path (None when there is no such stack).
_ACTOR_IN_STACK = _ACTOR_IN_ORG.add_columns(*STACK_COLUMNS).outerjoin(
    Stack,
    (Stack.org_id == Organization.id) & (Stack.slug == bindparam("stack")) & Stack.deleted_at.is_(None),
)


async def authenticate_in_stack(
    session: AsyncSession, token: str | None, slug: str, stack_slug: str, need: Need
) -> tuple[Actor, OrganizationRecord, StackRecord]:
    """authenticate_in_org and the stack of the path, in one statement: a request about one stack
    (starting a run). The refusals come in the same order as reading them one after the other:
    the token, the organization, the role, then the stack."""
    row = await _caller_row(session, _ACTOR_IN_STACK, token, {"slug": slug, "stack": stack_slug})
    actor, org = _caller_in_org(session, row, slug, need)
    stack = _stack_of(row, 6 + _ORG)
    if stack is None:
        raise NotFound(f"No stack '{stack_slug}'.")
    return actor, org, stack


async def authenticate_about(
    session: AsyncSession, token: str | None, slug: str, stack_slug: str | None
) -> tuple[Actor, OrganizationRecord | None, StackRecord | None]:
    """authenticate, and in the same statement the organization `slug` if the caller is a member
    of it (else None) and its stack `stack_slug` (None when it has none): a GraphQL query about
    one organization. The actor is authenticate's (GraphQL checks roles field by field)."""
    if stack_slug is None:
        row = await _caller_row(session, _ACTOR_IN_ORG, token, {"slug": slug})
    else:
        row = await _caller_row(session, _ACTOR_IN_STACK, token, {"slug": slug, "stack": stack_slug})
    user_id, email, token_id, last_used = tuple(row)[:4]
    actor = Actor(user_id=user_id, email=email, token_id=token_id, token_last_used_at=last_used)
    org = _org_of(row, 6)
    if org is None:
        return actor, None, None
    audit.bind_actor(session, actor)
    return actor, org, _stack_of(row, 6 + _ORG) if stack_slug is not None else None


async def _caller_row(
    session: AsyncSession, statement: Select[*tuple[Any, ...]], token: str | None, params: dict[str, Any]
) -> Row[*tuple[Any, ...]]:
    if not token:
        raise Unauthenticated("Send an API token: 'Authorization: Bearer <token>'.")
    rows = await column_rows(session, statement, {**params, "token_hash": hash_token(token), "now": utcnow()})
    if not rows:
        raise Unauthenticated(INVALID_TOKEN)
    return rows[0]


def _org_of(row: Row[*tuple[Any, ...]], start: int) -> OrganizationRecord | None:
    """The organization whose columns start at `start`; None where an outer join found none."""
    return OrganizationRecord(*row[start : start + _ORG]) if row[start] is not None else None


def _stack_of(row: Row[*tuple[Any, ...]], start: int) -> StackRecord | None:
    return StackRecord(*row[start:]) if row[start] is not None else None


def _caller_in_org(
    session: AsyncSession, row: Row[*tuple[Any, ...]], slug: str, need: Need
) -> tuple[Actor, OrganizationRecord]:
    user_id, email, token_id, last_used, role, groups = tuple(row)[:6]
    org = _org_of(row, 6)
    if org is None:
        raise NotFound(f"No organization '{slug}'.")
    actor = Actor(
        user_id=user_id,
        email=email,
        token_id=token_id,
        token_last_used_at=last_used,
        role=role,
        groups=tuple(groups or ()),
    )
    if isinstance(need, Role):
        check_role(role, need)
    audit.bind_actor(session, actor)
    return actor, org


_ORG_OF_MEMBER = (
    select(*ORG_COLUMNS)
    .join(Membership, Membership.org_id == Organization.id)
    .where(Organization.slug == bindparam("slug"), Membership.user_id == bindparam("user_id"))
)


async def org_for(session: AsyncSession, actor: Actor, slug: str) -> OrganizationRecord:
    """The organization, if the actor is a member. Others get the same NotFound as a missing one,
    so an organization's existence is never revealed to outsiders."""
    rows = await column_rows(session, _ORG_OF_MEMBER, {"slug": slug, "user_id": actor.user_id})
    if not rows:
        raise NotFound(f"No organization '{slug}'.")
    audit.bind_actor(session, actor)
    return OrganizationRecord(*rows[0])


_ORG_OF_MEMBER_AND_STACK = _ORG_OF_MEMBER.add_columns(*STACK_COLUMNS).outerjoin(
    Stack, and_(Stack.org_id == Organization.id, Stack.slug == bindparam("stack"), Stack.deleted_at.is_(None))
)


async def org_and_stack_for(
    session: AsyncSession, actor: Actor, slug: str, stack_slug: str
) -> tuple[OrganizationRecord, StackRecord | None]:
    """org_for and the organization's stack `stack_slug` (None when it has none), in one statement."""
    rows = await column_rows(
        session, _ORG_OF_MEMBER_AND_STACK, {"slug": slug, "user_id": actor.user_id, "stack": stack_slug}
    )
    if not rows:
        raise NotFound(f"No organization '{slug}'.")
    audit.bind_actor(session, actor)
    return OrganizationRecord(*rows[0][:_ORG]), _stack_of(rows[0], _ORG)


async def orgs_of(session: AsyncSession, actor: Actor) -> list[OrganizationRecord]:
    rows = await column_rows(
        session,
        select(*ORG_COLUMNS)
        .join(Membership, Membership.org_id == Organization.id)
        .where(Membership.user_id == actor.user_id)
        .order_by(Organization.slug),
    )
    return [OrganizationRecord(*row) for row in rows]
