"""Reads of Git-driven runs: the organization's delivery log and whether it has a secret."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models_git import GitDelivery, GitWebhookSecret

__all__ = ["GitDelivery", "deliveries", "secret_rotated_at"]

MAX_DELIVERIES = 100


async def deliveries(session: AsyncSession, org_id: str, limit: int = MAX_DELIVERIES) -> list[GitDelivery]:
    """The newest deliveries and polls that found a new head, newest first."""
    return list(
        await session.scalars(
            select(GitDelivery)
            .where(GitDelivery.org_id == org_id)
            .order_by(GitDelivery.id.desc())
            .limit(min(limit, MAX_DELIVERIES))
        )
    )


async def secret_rotated_at(session: AsyncSession, org_id: str) -> datetime | None:
    """When the webhook secret was last set (never the secret), or None without one."""
    return await session.scalar(select(GitWebhookSecret.rotated_at).where(GitWebhookSecret.org_id == org_id))
