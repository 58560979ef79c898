"""Whether the CLI's "yes" is what a run's apply waits for (read when its plan finishes)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Run
from firstlume.db.models_cli import CliRun
from firstlume.domain.runs import TriggerKind

# The origin a run's approval rule records when the CLI's "yes" is what it waits for.
CLI_CONFIRMATION_ORIGIN = "cli"


async def confirmed_by_cli(session: AsyncSession, run: Run) -> bool:
    """True for a CLI run started without -auto-approve; False for every other run."""
    if run.trigger_kind != TriggerKind.CLI:
        return False
    auto_apply = await session.scalar(select(CliRun.auto_apply).where(CliRun.run_id == run.id))
    return auto_apply is False
