"""Whether a CLI run's apply waits for an approval, read when its plan finishes: `terraform apply`
waits for the CLI's "yes" (a Firstlume approval by the person at the CLI); `-auto-approve` is
that approval given in advance. Either is enough only where the stack's rules ask for no more
(destructive changes confirmed one by one, named approvers, no self-approval): the run then waits
for its approval in Firstlume, as any run would."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Run
from firstlume.db.models_cli import CliRun
from firstlume.domain.runs import TriggerKind

# The origin a run's approval rule records when the CLI decided it.
CLI_CONFIRMATION_ORIGIN = "cli"
AUTO_APPROVE_ORIGIN = "cli -auto-approve"


async def approval_of_cli_run(
    session: AsyncSession, run: Run, *, required: bool, origin: str, needs_more: bool
) -> tuple[bool, str]:
    """(approval required, its origin) for `run`; the rules' own answer for a run not the CLI's."""
    if run.trigger_kind != TriggerKind.CLI:
        return required, origin
    auto_apply = await session.scalar(select(CliRun.auto_apply).where(CliRun.run_id == run.id))
    if auto_apply is None:
        return required, origin
    if not auto_apply:
        return True, origin if required else CLI_CONFIRMATION_ORIGIN
    if required and not needs_more:
        return False, AUTO_APPROVE_ORIGIN
    return required, origin
