"""The organization's Git delivery log, live: merged into the Subscription root (schema.py)."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import strawberry

from firstlume.api.graphql.subscriptions import Ctx
from firstlume.api.graphql.types.git import GitDelivery
from firstlume.pubsub import CLOSED, org_git_channel
from firstlume.services import accounts
from firstlume.services.logs import SAFETY_POLL_SECONDS
from firstlume.services.reads import git as git_reads


@strawberry.type
class GitSubscription:
    @strawberry.subscription(
        description="The organization's newest Git deliveries (as Organization.gitDeliveries): now, then "
        "after each delivery or poll that is logged."
    )
    async def git_deliveries(self, info: Ctx, org: str) -> AsyncGenerator[list[GitDelivery], None]:
        ctx = info.context.app
        actor = info.context.require_actor()
        async with ctx.db.read() as session:
            org_row = await accounts.org_for(session, actor, org)
        # Subscribed before the first read: a delivery logged in between is not missed.
        async with ctx.pubsub.subscribe(org_git_channel(org_row.id)) as events:
            last: list[str] | None = None
            while True:
                async with ctx.db.read() as session:
                    rows = await git_reads.deliveries(session, org_row.id)
                # The result of an accepted delivery fills in after its row: compare results too.
                seen = [f"{row.id}:{row.result}" for row in rows]
                if seen != last:
                    last = seen
                    yield [GitDelivery.of(row) for row in rows]
                event = await events.next(SAFETY_POLL_SECONDS)
                if event is CLOSED or any(e is CLOSED for e in events.pending()):
                    return
