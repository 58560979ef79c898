"""Testing a policy while writing it: evaluated, under the same time limit, against an input as
given or against the input a past run's plan gives (adoption-api.md section 8)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from firstlume.db.models import Run
from firstlume.domain.errors import Conflict, NotFound
from firstlume.domain.policies import DEFAULT_TIME_LIMIT_S
from firstlume.services.commands import TryPolicy
from firstlume.services.context import Context
from firstlume.services.policies.evaluation import evaluate, policy_input
from firstlume.services.policies.store import get_policy


class RunHasNoPlan(Conflict):
    code = "run_has_no_plan"


async def try_policy(
    ctx: Context, org_id: str, name: str, command: TryPolicy, time_limit_s: float = DEFAULT_TIME_LIMIT_S
) -> dict[str, Any]:
    """The policy's check on the input; the input is not returned (a run's is masked anyway)."""
    async with ctx.db.read() as session:
        policy = await get_policy(session, org_id, name)
        if command.input is not None:
            document = command.input
        else:
            run = await session.scalar(select(Run).where(Run.id == command.run, Run.org_id == org_id))
            if run is None:
                raise NotFound(f"No run '{command.run}' in this organization.")
            if not run.has_plan:
                raise RunHasNoPlan(f"Run {run.id} has no stored plan to test the policy against.")
            document = await policy_input(ctx, session, run)
    [check] = await evaluate([policy], document, time_limit_s)
    return check.as_dict()
