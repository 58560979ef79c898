"""The dependency triggers' outbox: an apply that ends `applied` in a stack that others read
writes its trigger row in that same transaction (domain/effects.py `triggers_dependents`). If the
apply's end commits, the trigger exists, and a replica's DependencyTriggers (triggers.py) starts
the dependents' runs; if it rolls back, there is nothing to start. A crash in between loses
nothing: the row waits for the next pass of whichever control plane runs."""

from __future__ import annotations

from sqlalchemy import select

from firstlume.db.models import Run
from firstlume.db.models_dependencies import DependencyTrigger, StackDependency
from firstlume.db.types import utcnow
from firstlume.services.context import Unit


async def enqueue(unit: Unit, run: Run) -> bool:
    """Writes the trigger of the applied `run` when some stack reads its stack's outputs; one
    statement when none does."""
    read = await unit.session.scalar(
        select(StackDependency.id).where(StackDependency.upstream_stack_id == run.stack_id).limit(1)
    )
    if read is None:
        return False
    unit.session.add(DependencyTrigger(upstream_run_id=run.id, created_at=utcnow()))
    unit.wrote_dependency_triggers = True
    return True
