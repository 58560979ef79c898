"""Organizations, users, memberships and API tokens."""

from __future__ import annotations

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import hash_token, new_token
from firstlume.db.models import ApiToken, Membership, Organization, User
from firstlume.domain.audit import AuditAction
from firstlume.domain.errors import AlreadyExists, InvalidRequest, NotFound, Unauthenticated
from firstlume.services import audit
from firstlume.services.context import Actor
from firstlume.services.validation import require_slug, require_str


async def create_org(session: AsyncSession, slug: str, name: str | None = None) -> Organization:
    require_slug("slug", slug)
    if await session.scalar(select(Organization.id).where(Organization.slug == slug)):
        raise AlreadyExists(f"An organization '{slug}' already exists.")
    org = Organization(slug=slug, name=name or slug)
    session.add(org)
    await session.flush()
    await audit.record(
        session, org, AuditAction.ORGANIZATION_CREATE, f"organization:{slug}", {"name": org.name}
    )
    return org


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


async def ensure_membership(session: AsyncSession, org: Organization, user: User) -> None:
    existing = await session.scalar(
        select(Membership.id).where(Membership.org_id == org.id, Membership.user_id == user.id)
    )
    if existing is None:
        session.add(Membership(org_id=org.id, user_id=user.id))
        await session.flush()


async def create_token(session: AsyncSession, org_slug: str, email: str, name: str = "") -> str:
    """Creates the user and membership when needed; returns the token, which is stored only hashed."""
    org = await session.scalar(select(Organization).where(Organization.slug == org_slug))
    if org is None:
        raise NotFound(f"No organization '{org_slug}'.")
    user = await ensure_user(session, email)
    await ensure_membership(session, org, user)
    token = new_token("fl")
    row = ApiToken(user_id=user.id, token_hash=hash_token(token), name=name)
    session.add(row)
    await session.flush()
    await audit.record(
        session, org, AuditAction.TOKEN_CREATE, f"token:{row.id}", {"user": email, "name": name}
    )
    return token


async def authenticate(session: AsyncSession, token: str | None) -> Actor:
    if not token:
        raise Unauthenticated("Send an API token: 'Authorization: Bearer <token>'.")
    row = (
        await session.execute(
            select(User.id, User.email, ApiToken.id.label("token_id"))
            .join(ApiToken, ApiToken.user_id == User.id)
            .where(ApiToken.token_hash == hash_token(token), ApiToken.revoked_at.is_(None))
        )
    ).first()
    if row is None:
        raise Unauthenticated("The API token is not valid.")
    return Actor(user_id=row.id, email=row.email, token_id=row.token_id)


# The caller and, if they are a member, the organization: built once, it runs on every request.
_ACTOR_IN_ORG = (
    select(User.id, User.email, ApiToken.id, Organization)
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
    .where(ApiToken.token_hash == bindparam("token_hash"), ApiToken.revoked_at.is_(None))
)


async def authenticate_in_org(
    session: AsyncSession, token: str | None, slug: str
) -> tuple[Actor, Organization]:
    """authenticate, then org_for, in one statement: the start of every REST request."""
    if not token:
        raise Unauthenticated("Send an API token: 'Authorization: Bearer <token>'.")
    row = (await session.execute(_ACTOR_IN_ORG, {"slug": slug, "token_hash": hash_token(token)})).first()
    if row is None:
        raise Unauthenticated("The API token is not valid.")
    user_id, email, token_id, org = row
    if org is None:
        raise NotFound(f"No organization '{slug}'.")
    actor = Actor(user_id=user_id, email=email, token_id=token_id)
    audit.bind_actor(session, actor)
    return actor, org


async def org_for(session: AsyncSession, actor: Actor, slug: str) -> Organization:
    """The organization, if the actor is a member. Others get the same NotFound as a missing one,
    so an organization's existence is never revealed to outsiders."""
    org = await session.scalar(
        select(Organization)
        .join(Membership, Membership.org_id == Organization.id)
        .where(Organization.slug == slug, Membership.user_id == actor.user_id)
    )
    if org is None:
        raise NotFound(f"No organization '{slug}'.")
    audit.bind_actor(session, actor)
    return org


async def orgs_of(session: AsyncSession, actor: Actor) -> list[Organization]:
    return list(
        await session.scalars(
            select(Organization)
            .join(Membership, Membership.org_id == Organization.id)
            .where(Membership.user_id == actor.user_id)
            .order_by(Organization.slug)
        )
    )
