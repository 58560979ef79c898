"""Reading the audit trail: an organization's entries, newest first, filtered, a page at a time.
REST (`GET $O/audit`) and GraphQL (`organization.audit`) parse their filters here, so both refuse
the same things with the same words."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import Table, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models_audit import AuditEntry
from firstlume.domain.audit import AuditAction
from firstlume.domain.errors import InvalidRequest
from firstlume.services.reads.rows import column_rows, columns_of

MAX_PAGE = 500
DEFAULT_PAGE = 50
CURSOR = re.compile(r"^[1-9][0-9]{0,18}$")
ACTIONS = ", ".join(a.value for a in AuditAction)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One change made through an API or the CLI."""

    id: int
    created_at: datetime
    actor: str  # the person's email, or "system"
    actor_token_id: str | None
    action: str
    target: str
    stack: str | None
    details: dict[str, Any]
    via: str
    request_id: str | None


_COLUMNS = columns_of(AuditRecord, cast(Table, AuditEntry.__table__))


@dataclass(frozen=True)
class AuditFilter:
    """Entries that match every given part; within a part, any of its values."""

    actors: tuple[str, ...] = ()
    actions: tuple[AuditAction, ...] = ()
    targets: tuple[str, ...] = ()
    stacks: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None


def _time(name: str, raw: str | None) -> datetime | None:
    if raw is None or raw == "":
        return None
    try:
        value = datetime.fromisoformat(raw.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        value = None
    if value is None or value.tzinfo is None:
        raise InvalidRequest(
            f"'{name}' must be an RFC 3339 time with a zone, such as 2026-05-01T12:00:00Z; got {raw[:80]!r}.",
            field=name,
        )
    return value.astimezone(UTC)


def _texts(name: str, values: Sequence[str], max_length: int) -> tuple[str, ...]:
    for value in values:
        if len(value) > max_length:
            raise InvalidRequest(f"'{name}' must be at most {max_length} characters.", field=name)
    return tuple(dict.fromkeys(values))


def parse_filter(
    *,
    actors: Sequence[str] = (),
    actions: Sequence[str] = (),
    targets: Sequence[str] = (),
    stacks: Sequence[str] = (),
    since: str | None = None,
    until: str | None = None,
) -> AuditFilter:
    known = {a.value for a in AuditAction}
    for action in actions:
        if action not in known:
            raise InvalidRequest(f"'action' must be one of {ACTIONS}; got {action[:80]!r}.", field="action")
    parsed = AuditFilter(
        actors=_texts("actor", actors, 400),
        actions=tuple(AuditAction(a) for a in dict.fromkeys(actions)),
        targets=_texts("target", targets, 1200),
        stacks=_texts("stack", stacks, 63),
        since=_time("since", since),
        until=_time("until", until),
    )
    if parsed.since and parsed.until and parsed.since > parsed.until:
        raise InvalidRequest("'since' must not be after 'until'.", field="since")
    return parsed


def parse_cursor(raw: str | None) -> int | None:
    """A page's `next_cursor` (the last entry's id), or None for the first page."""
    if raw is None or raw == "":
        return None
    if not CURSOR.match(raw):
        raise InvalidRequest(
            f"'cursor' must be a cursor from a previous page's next_cursor; got {raw[:80]!r}.", field="cursor"
        )
    return int(raw)


def check_limit(limit: int, name: str = "limit") -> int:
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidRequest(f"'{name}' must be between 1 and {MAX_PAGE}; got {limit}.", field=name)
    return limit


@dataclass(frozen=True, slots=True)
class AuditPage:
    entries: list[AuditRecord]
    next_cursor: str | None


async def audit_page(
    session: AsyncSession, org_id: str, where: AuditFilter, limit: int, before: int | None = None
) -> AuditPage:
    """Up to `limit` entries, newest first, older than the cursor `before`."""
    query = select(*_COLUMNS).where(AuditEntry.org_id == org_id)
    if before is not None:
        query = query.where(AuditEntry.id < before)
    if where.actors:
        query = query.where(AuditEntry.actor.in_(where.actors))
    if where.actions:
        query = query.where(AuditEntry.action.in_([a.value for a in where.actions]))
    if where.targets:
        query = query.where(AuditEntry.target.in_(where.targets))
    if where.stacks:
        query = query.where(AuditEntry.stack.in_(where.stacks))
    if where.since is not None:
        query = query.where(AuditEntry.created_at >= where.since)
    if where.until is not None:
        query = query.where(AuditEntry.created_at < where.until)
    rows = [
        AuditRecord(*row)
        for row in await column_rows(session, query.order_by(AuditEntry.id.desc()).limit(limit + 1))
    ]
    page = rows[:limit]
    return AuditPage(entries=page, next_cursor=str(page[-1].id) if len(rows) > limit else None)
