"""Browser sessions of people who signed in through single sign-on.

A session is a row of api_tokens of kind "session": stored hashed, expiring, and found by the
same statement that authenticates an API token, so a session and a token resolve to the same
member, role and groups, the audit trail names the person for both, and ending a session closes
its open subscriptions as revoking a token does (token_watch.py). Its CSRF token is derived from
the session's secret, which only the HttpOnly cookie carries: a page of another site can read
neither."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import hash_token, new_token
from firstlume.db.models import ApiToken, Membership, User
from firstlume.db.types import utcnow
from firstlume.domain.audit import AuditAction
from firstlume.services import audit
from firstlume.services.context import Actor

SESSION = "session"
SESSION_NAME = "browser session (single sign-on)"


@dataclass(frozen=True)
class NewSession:
    token: str  # the cookie's value: never stored, never shown
    expires_at: datetime


def csrf_token(session_token: str) -> str:
    """The CSRF token of a session: a keyed hash of its secret."""
    return hmac.new(session_token.encode(), b"firstlume-csrf", hashlib.sha256).hexdigest()


def csrf_matches(session_token: str, sent: str | None) -> bool:
    return sent is not None and hmac.compare_digest(csrf_token(session_token), sent)


async def start_session(
    session: AsyncSession, actor: Actor, lifetime: timedelta, details: dict[str, object]
) -> NewSession:
    """A new session of `actor` (whose token_id is then the session's row), recorded in the
    audit trail of each organization the person is a member of."""
    token = new_token("fls")
    row = ApiToken(
        user_id=actor.user_id,
        token_hash=hash_token(token),
        name=SESSION_NAME,
        kind=SESSION,
        expires_at=utcnow() + lifetime,
    )
    session.add(row)
    await session.flush()
    signed_in = Actor(user_id=actor.user_id, email=actor.email, token_id=row.id)
    for org_id in await _orgs_of(session, actor.user_id):
        await audit.record(
            session, org_id, AuditAction.SESSION_START, f"session:{row.id}", details, actor=signed_in
        )
    assert row.expires_at is not None
    return NewSession(token=token, expires_at=row.expires_at)


async def end_session(session: AsyncSession, token: str) -> bool:
    """Ends the session of `token` at once (its subscriptions close within seconds); False when
    there was no live session of that token."""
    row = await session.scalar(
        select(ApiToken)
        .where(
            ApiToken.token_hash == hash_token(token), ApiToken.kind == SESSION, ApiToken.revoked_at.is_(None)
        )
        .with_for_update()
    )
    if row is None:
        return False
    row.revoked_at = utcnow()
    await session.flush()
    email = await _email(session, row.user_id)
    actor = Actor(user_id=row.user_id, email=email, token_id=row.id)
    for org_id in await _orgs_of(session, row.user_id):
        await audit.record(session, org_id, AuditAction.SESSION_END, f"session:{row.id}", actor=actor)
    return True


async def _orgs_of(session: AsyncSession, user_id: str) -> list[str]:
    return list(await session.scalars(select(Membership.org_id).where(Membership.user_id == user_id)))


async def _email(session: AsyncSession, user_id: str) -> str:
    return str(await session.scalar(select(User.email).where(User.id == user_id)))
