"""Where a stack stands (services/reads/summaries.py), as the stacks list shows it."""

from __future__ import annotations

import strawberry

from firstlume.api.graphql.enums import DriftStatus
from firstlume.api.graphql.loaders import Loaders
from firstlume.api.graphql.types.runs import Run


@strawberry.type(
    description="Where a stack stands: its last apply's outcome, the runs waiting for people, the runs "
    "under way, and its drift. Not its newest run: a queued plan does not make an applied stack queued."
)
class StackSummary:
    last_apply: Run | None = strawberry.field(
        description="The newest apply or destroy run that ended applied or failed; null: never applied."
    )
    awaiting_approval: int = strawberry.field(description="Runs waiting for someone's approval.")
    active: int = strawberry.field(description="Runs queued, planning or applying (not awaiting approval).")
    drift: DriftStatus = strawberry.field(description="The outcome of the newest finished drift run.")


async def summary_of(loaders: Loaders, stack_id: str) -> StackSummary:
    found = await loaders.stack_summary.load(stack_id)
    return StackSummary(
        last_apply=Run(row=found.last_apply, loaders=loaders) if found.last_apply else None,
        awaiting_approval=found.awaiting_approval,
        active=found.active,
        drift=found.drift,
    )
