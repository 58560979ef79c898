"""API tokens a person manages: named, optionally expiring, last use recorded, revocable. Only
the hash is stored; the token is shown once, when it is created. Open subscriptions of a revoked
or expired token close within seconds (api/graphql/revocation.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from sqlalchemy import Table, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import hash_token, new_token
from firstlume.db.models import ApiToken, Membership, User
from firstlume.db.types import utcnow
from firstlume.domain.audit import AuditAction
from firstlume.domain.errors import InvalidRequest, NotFound
from firstlume.services import audit
from firstlume.services.access.commands import CreateToken
from firstlume.services.access.roles import Role, check_role
from firstlume.services.context import Actor, Context, Unit
from firstlume.services.reads.catalog import OrganizationRecord
from firstlume.services.reads.rows import column_rows, columns_of, record_of


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """An API token as its owner sees it: never the token, nor its hash."""

    id: str
    name: str
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None


_COLUMNS = columns_of(TokenRecord, cast(Table, ApiToken.__table__))


@dataclass(frozen=True, slots=True)
class NewToken:
    row: TokenRecord
    token: str  # shown once


async def list_tokens(
    session: AsyncSession, actor: Actor, org: OrganizationRecord | None = None, member: str | None = None
) -> list[TokenRecord]:
    """The caller's own tokens, not revoked, newest first; with `member` (an email), that member's
    of `org`, which only its admins may list (to find the one to revoke)."""
    user_id = actor.user_id
    if member is not None and member.lower() != actor.email.lower():
        assert org is not None
        check_role(await _role_in(session, org, actor.user_id), Role.ADMIN)
        found = await session.scalar(
            select(User.id)
            .join(Membership, Membership.user_id == User.id)
            .where(func.lower(User.email) == member.lower(), Membership.org_id == org.id)
        )
        if found is None:
            raise NotFound(f"No member '{member}' in this organization.")
        user_id = found
    rows = await column_rows(
        session,
        select(*_COLUMNS)
        .where(ApiToken.user_id == user_id, ApiToken.revoked_at.is_(None), ApiToken.kind == "api")
        .order_by(ApiToken.created_at.desc(), ApiToken.id),
    )
    return [TokenRecord(*row) for row in rows]


async def create_token(
    session: AsyncSession, actor: Actor, command: CreateToken, org: OrganizationRecord
) -> NewToken:
    """A token of the caller's, made through `org`'s API (whose audit trail records it)."""
    lifetime = command.lifetime()
    token = new_token("fl")
    row = ApiToken(
        user_id=actor.user_id,
        token_hash=hash_token(token),
        name=command.name,
        expires_at=utcnow() + lifetime if lifetime else None,
    )
    session.add(row)
    await session.flush()
    expires = row.expires_at.isoformat() if row.expires_at else None
    await audit.record(
        session, org, AuditAction.TOKEN_CREATE, f"token:{row.id}", {"name": row.name, "expires_at": expires}
    )
    return NewToken(row=record_of(TokenRecord, row), token=token)


async def revoke_token(unit: Unit, actor: Actor, token_id: str, org: OrganizationRecord) -> TokenRecord:
    """Revokes one of the caller's own tokens, or, by an admin of `org`, a token of another of its
    members (an admin's way to cut off a lost laptop's or a departed member's token). A token of
    someone who is not a member of `org` is not found, whoever asks."""
    row = await unit.session.scalar(
        select(ApiToken).where(ApiToken.id == token_id).with_for_update()
        if isinstance(token_id, str) and len(token_id) <= 64
        else select(ApiToken).where(ApiToken.id.is_(None))
    )
    owner = actor.email
    if row is not None and row.user_id != actor.user_id:
        found = await _member_email(unit.session, org, row.user_id)
        if found is None:
            row = None
        else:
            check_role(await _role_in(unit.session, org, actor.user_id), Role.ADMIN)
            owner = found
    if row is None or row.revoked_at is not None:
        raise NotFound(f"You have no token '{token_id}'.")
    row.revoked_at = utcnow()
    await unit.session.flush()
    await audit.record(
        unit.session, org, AuditAction.TOKEN_REVOKE, f"token:{row.id}", {"name": row.name, "user": owner}
    )
    return record_of(TokenRecord, row)


async def _member_email(session: AsyncSession, org: OrganizationRecord, user_id: str) -> str | None:
    return await session.scalar(
        select(User.email)
        .join(Membership, Membership.user_id == User.id)
        .where(User.id == user_id, Membership.org_id == org.id)
    )


async def _role_in(session: AsyncSession, org: OrganizationRecord, user_id: str) -> str | None:
    return await session.scalar(
        select(Membership.role).where(Membership.org_id == org.id, Membership.user_id == user_id)
    )


# A token's last use is written at most this often: not a write per request.
LAST_USED_PRECISION = timedelta(minutes=1)


async def revoke_by_admin(session: AsyncSession, token_id: str | None, token: str | None) -> str:
    """The CLI's revocation (whoever owns the token): by id, or by the token itself. Recorded in
    the audit trail of every organization the token's owner belongs to (where it worked)."""
    if (token_id is None) == (token is None):
        raise InvalidRequest("Give the token's id, or --token with the token itself (one of them).")
    where = (
        ApiToken.id == token_id if token_id is not None else ApiToken.token_hash == hash_token(token or "")
    )
    row = await session.scalar(select(ApiToken).where(where).with_for_update())
    if row is None or row.revoked_at is not None:
        raise NotFound("No such token (or it is revoked already).")
    row.revoked_at = utcnow()
    await session.flush()
    owner = await session.scalar(select(User.email).where(User.id == row.user_id))
    for org_id in await session.scalars(select(Membership.org_id).where(Membership.user_id == row.user_id)):
        await audit.record(
            session, org_id, AuditAction.TOKEN_REVOKE, f"token:{row.id}", {"name": row.name, "user": owner}
        )
    return row.id


async def touch_if_stale(ctx: Context, actor: Actor) -> None:
    last = actor.token_last_used_at
    if actor.token_id is not None and (last is None or utcnow() - last > LAST_USED_PRECISION):
        await touch(ctx, actor.token_id)


async def touch(ctx: Context, token_id: str, now: datetime | None = None) -> None:
    """Records the token's use (at most once a minute per token: see api/rest/guard.py)."""
    now = now or utcnow()
    async with ctx.db.transaction() as session:
        await session.execute(
            update(ApiToken)
            .where(ApiToken.id == token_id, or_(ApiToken.last_used_at.is_(None), ApiToken.last_used_at < now))
            .values(last_used_at=now)
        )


async def token_usable(session: AsyncSession, token_id: str) -> bool:
    """Whether the token is still neither revoked nor expired."""
    row = await session.execute(
        select(ApiToken.revoked_at, ApiToken.expires_at).where(ApiToken.id == token_id)
    )
    found = row.first()
    if found is None:
        return False
    revoked_at, expires_at = found
    return revoked_at is None and (expires_at is None or expires_at > utcnow())
