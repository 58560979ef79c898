"""What a run's plan planned against, and the check that stops an apply whose state has moved
since: at the start of the apply phase, before Terraform is started."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Run, StateHead
from firstlume.domain.errors import Conflict
from firstlume.domain.state import ROOT_UNIT, moved_units, plan_state_serial, state_moved_message

MANAGED_BACKEND = "firstlume"


class StateMoved(Conflict):
    code = "state_changed"


async def _current_serials(session: AsyncSession, stack_id: str) -> dict[str, int]:
    rows = await session.execute(
        select(StateHead.unit, StateHead.serial).where(StateHead.stack_id == stack_id)
    )
    return {unit: serial or 0 for unit, serial in rows}


async def record_planned_serials(session: AsyncSession, run: Run, plan_file: bytes) -> None:
    """Each unit's serial when the plan is stored; the root module's is read from the saved plan
    itself (the state Terraform planned against), which a write in between cannot blur. Which
    units are managed is known for sure only later (the executor reports its backends apart),
    so every unit of the stack is recorded and the check looks only at the managed ones."""
    serials = await _current_serials(session, run.stack_id)
    planned = plan_state_serial(plan_file)
    if planned is not None:
        serials[ROOT_UNIT] = planned
    run.planned_state_serials = serials


async def state_moved_since_plan(session: AsyncSession, run: Run) -> str | None:
    """The run's error when a managed unit's state moved since the plan, else None."""
    managed = {str(b.get("unit")) for b in run.state_backends or [] if b.get("backend") == MANAGED_BACKEND}
    if not managed or run.planned_state_serials is None:
        return None
    planned = {unit: serial for unit, serial in run.planned_state_serials.items() if unit in managed}
    planned.update({unit: 0 for unit in managed if unit not in planned})
    moved = moved_units(planned, await _current_serials(session, run.stack_id))
    return state_moved_message(moved) if moved else None
