"""A run's steps (checkout, init, plan, approval, apply, …): the executor reports most of them,
the lifecycle's effects set the approval step and fail what was running."""

from __future__ import annotations

from sqlalchemy import func, select

from firstlume.db.models import Run, RunStep
from firstlume.db.types import utcnow
from firstlume.domain.runs import FINISHED_STEP_STATUSES, StepStatus
from firstlume.protocol.events import StepChanged
from firstlume.pubsub import run_channel
from firstlume.services.context import Unit


async def find_step(unit: Unit, run: Run, name: str) -> RunStep | None:
    return await unit.session.scalar(select(RunStep).where(RunStep.run_id == run.id, RunStep.name == name))


async def set_step(unit: Unit, run: Run, name: str, status: StepStatus | str) -> RunStep:
    """Creates or moves a step; times follow the status."""
    return await move_step(unit, run, name, status, await find_step(unit, run, name))


async def move_step(
    unit: Unit, run: Run, name: str, status: StepStatus | str, step: RunStep | None
) -> RunStep:
    """`set_step` for a caller that has read the step already (`find_step`): None creates it."""
    status = StepStatus(status)
    session = unit.session
    now = utcnow()
    if step is None:
        position = (await session.scalar(select(func.count()).where(RunStep.run_id == run.id))) or 0
        step = RunStep(run_id=run.id, name=name, position=position, status=StepStatus.PENDING)
        session.add(step)
    if status is StepStatus.RUNNING and step.started_at is None:
        step.started_at = now
    if status in FINISHED_STEP_STATUSES:
        step.started_at = step.started_at or now
        step.finished_at = now
    step.status = status
    await session.flush()
    unit.publish_after_commit(run_channel(run.id), StepChanged(run_id=run.id, step=name, status=status))
    return step
