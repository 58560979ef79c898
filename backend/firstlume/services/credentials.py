"""Whether a token is one Firstlume issued and has not revoked: a user's API token or a run
phase's. Only a cheap first check, made before a request body is read; each route still checks
what the token may do."""

from __future__ import annotations

from sqlalchemy import exists, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import hash_token
from firstlume.db.models import ApiToken, PhaseToken


async def token_is_known(session: AsyncSession, token: str) -> bool:
    digest = hash_token(token)
    query = select(
        or_(
            exists().where(ApiToken.token_hash == digest, ApiToken.revoked_at.is_(None)),
            exists().where(PhaseToken.token_hash == digest, PhaseToken.revoked_at.is_(None)),
        )
    )
    return bool(await session.scalar(query))
