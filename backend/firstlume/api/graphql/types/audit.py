"""The audit trail of an organization, as a connection (newest first)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import strawberry
from strawberry.scalars import JSON

from firstlume.api.graphql.loaders import Loaders
from firstlume.api.graphql.types.pagination import PageInfo
from firstlume.services.reads import audit as audit_reads
from firstlume.services.reads.audit import AuditRecord


@strawberry.type(description="One change made through an API or the CLI.")
class AuditEntry:
    id: strawberry.ID
    time: datetime
    actor: str = strawberry.field(description='The person\'s email, or "system".')
    token_id: str | None = strawberry.field(description="The API token the change was made with.")
    action: str = strawberry.field(description='Such as "run.approve" or "settings.update".')
    target: str = strawberry.field(description='"<kind>:<name>", such as "stack:net" or "run:<id>".')
    stack: str | None = strawberry.field(description="The slug of the stack the change concerns, if any.")
    details: JSON = strawberry.field(description="Names and non-secret values; never a variable's value.")
    via: str = strawberry.field(description="rest | graphql | cli | system")
    request_id: str | None


def entry_of(row: AuditRecord) -> AuditEntry:
    return AuditEntry(
        id=strawberry.ID(str(row.id)),
        time=row.created_at,
        actor=row.actor,
        token_id=row.actor_token_id,
        action=row.action,
        target=row.target,
        stack=row.stack,
        details=cast(Any, row.details),
        via=row.via,
        request_id=row.request_id,
    )


@strawberry.type
class AuditConnection:
    nodes: list[AuditEntry]
    page_info: PageInfo


async def audit_of(
    loaders: Loaders,
    org_id: str,
    *,
    first: int,
    after: str | None,
    actor: list[str] | None,
    action: list[str] | None,
    target: list[str] | None,
    stack: list[str] | None,
    since: str | None,
    until: str | None,
) -> AuditConnection:
    audit_reads.check_limit(first, "first")
    where = audit_reads.parse_filter(
        actors=actor or (),
        actions=action or (),
        targets=target or (),
        stacks=stack or (),
        since=since,
        until=until,
    )
    before = audit_reads.parse_cursor(after)
    async with loaders.reads.session() as session:
        page = await audit_reads.audit_page(session, org_id, where, first, before)
    return AuditConnection(
        nodes=[entry_of(e) for e in page.entries],
        page_info=PageInfo(has_next_page=page.next_cursor is not None, end_cursor=page.next_cursor),
    )
