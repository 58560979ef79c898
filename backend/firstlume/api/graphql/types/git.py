"""Git-driven runs in the schema: the organization's delivery log."""

from __future__ import annotations

from datetime import datetime

import strawberry

from firstlume.services.reads.git import GitDeliveryRecord


@strawberry.type(description="A stack a delivery started nothing for, and why.")
class IgnoredStack:
    stack: str
    reason: str


@strawberry.type(
    description="A webhook delivery (accepted, ignored or refused) or a poll that found a new head."
)
class GitDelivery:
    id: strawberry.ID
    received_at: datetime
    source: str = strawberry.field(
        description='"webhook:github", "webhook:gitea", "webhook:gitlab" or "poll".'
    )
    delivery: str | None = strawberry.field(description="The host's delivery id.")
    event: str | None
    repository: str | None
    ref: str | None
    head: str | None
    http_status: int = strawberry.field(description="What Firstlume answered the host.")
    runs: list[strawberry.ID] = strawberry.field(description="The runs it started.")
    ignored: list[IgnoredStack] = strawberry.field(description="The stacks it started nothing for, and why.")
    outcome: str = strawberry.field(description="In words: runs started, or why it was ignored or refused.")

    @staticmethod
    def of(row: GitDeliveryRecord) -> GitDelivery:
        result = row.result or {}
        runs = [strawberry.ID(r) for r in result.get("runs", []) if isinstance(r, str)]
        listed = result.get("ignored")
        ignored = [
            IgnoredStack(stack=str(i.get("stack")), reason=str(i.get("reason")))
            for i in (listed if isinstance(listed, list) else [])
            if isinstance(i, dict)
        ]
        return GitDelivery(
            id=strawberry.ID(str(row.id)),
            received_at=row.received_at,
            source=row.source,
            delivery=row.delivery,
            event=row.event,
            repository=row.repository,
            ref=row.ref,
            head=row.head,
            http_status=row.http_status,
            runs=runs,
            ignored=ignored,
            outcome=outcome_text(result),
        )


def outcome_text(result: dict[str, object]) -> str:
    if "refused" in result:
        return f"refused: {result.get('message') or result['refused']}"
    if result.get("ignored") == "event":
        return "ignored: not a push event"
    runs = result.get("runs") or []
    if isinstance(runs, list) and runs:
        return f"{len(runs)} run{'s' if len(runs) != 1 else ''} started"
    if result.get("reason"):
        return f"ignored: {result['reason']}"
    ignored = result.get("ignored")
    if isinstance(ignored, list) and ignored:
        return "ignored: " + "; ".join(
            f"{i.get('stack')}: {i.get('reason')}" for i in ignored if isinstance(i, dict)
        )
    return "no run started"
