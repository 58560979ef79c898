"""Reads of Git-driven runs: the organization's delivery log and whether it has a secret."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models_git import GitDelivery, GitWebhookSecret
from firstlume.services.reads.rows import column_rows, columns_of

MAX_DELIVERIES = 100


@dataclass(frozen=True, slots=True)
class GitDeliveryRecord:
    """A webhook delivery (accepted, ignored or refused) or a poll that found a new head."""

    id: int
    received_at: datetime
    source: str  # "webhook:github", "webhook:gitea", "webhook:gitlab", "webhook" or "poll"
    delivery: str | None
    event: str | None
    repository: str | None
    ref: str | None
    head: str | None
    http_status: int
    # {"runs": [ids], "ignored": [{"stack", "reason"}]}, or {"refused": code, "message"}.
    result: dict[str, Any]


_COLUMNS = columns_of(GitDeliveryRecord, cast(Table, GitDelivery.__table__))


async def deliveries(
    session: AsyncSession, org_id: str, limit: int = MAX_DELIVERIES
) -> list[GitDeliveryRecord]:
    """The newest deliveries and polls that found a new head, newest first."""
    rows = await column_rows(
        session,
        select(*_COLUMNS)
        .where(GitDelivery.org_id == org_id)
        .order_by(GitDelivery.id.desc())
        .limit(min(limit, MAX_DELIVERIES)),
    )
    return [GitDeliveryRecord(*row) for row in rows]


async def secret_rotated_at(session: AsyncSession, org_id: str) -> datetime | None:
    """When the webhook secret was last set (never the secret), or None without one."""
    return await session.scalar(select(GitWebhookSecret.rotated_at).where(GitWebhookSecret.org_id == org_id))
