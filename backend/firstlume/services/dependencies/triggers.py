"""Starting the runs of the stacks that read an applied stack's outputs (adoption-api.md,
section 9): each direct dependent that reads an output whose value the apply changed gets one
run of its trigger type (`apply`, else a plan), `trigger` `{"kind": "dependency", "upstream_run"}`.
Chains follow: a dependent's apply that changes what the next one reads triggers it in turn.

Each pending trigger (outbox.py) is carried out in one transaction that claims its row (`FOR
UPDATE SKIP LOCKED` on PostgreSQL: a replica skips the row another one holds; SQLite has one
writer), starts the runs and marks the row done; a crash before the commit leaves the row
pending and no run started. A run started twice for one upstream run and stack is refused by
the database itself (runs' unique index on trigger_upstream_run_id and stack_id)."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import func, select

from firstlume.background import BackgroundService
from firstlume.db.models import Run, Stack, StateHead, StateVersion
from firstlume.db.models_dependencies import DependencyTrigger, StackDependency
from firstlume.db.types import utcnow
from firstlume.domain.dependencies import changed_outputs
from firstlume.domain.errors import FirstlumeError
from firstlume.domain.git import StackTrigger
from firstlume.domain.runs import RunType, TriggerKind
from firstlume.domain.state import ROOT_UNIT
from firstlume.services.commands import StartRun
from firstlume.services.context import Context, Unit
from firstlume.services.dependencies.inputs import state_outputs
from firstlume.services.runs import Trigger, start_run

log = logging.getLogger("firstlume.dependencies")


async def _serial_written_by(unit: Unit, run: Run) -> int | None:
    """The last serial of the stack's root state that `run` wrote (its apply), if any."""
    return await unit.session.scalar(
        select(func.max(StateVersion.serial))
        .join(StateHead, StateHead.id == StateVersion.head_id)
        .where(StateHead.stack_id == run.stack_id, StateHead.unit == ROOT_UNIT, StateVersion.run_id == run.id)
    )


async def start_dependents(ctx: Context, unit: Unit, upstream_run_id: str) -> dict[str, Any]:
    """Starts a run of each direct dependent of the applied run's stack that reads an output the
    apply changed; returns what it did, by names only (never a value)."""
    session = unit.session
    run = await session.get(Run, upstream_run_id)
    upstream = await session.get(Stack, run.stack_id) if run is not None else None
    if run is None or upstream is None or upstream.deleted_at is not None:
        return {"started": [], "gone": "the upstream run or stack is gone"}
    after_serial = await _serial_written_by(unit, run)
    if after_serial is None:
        return {"started": [], "unchanged": "the apply wrote no managed state"}
    before_serial = (run.planned_state_serials or {}).get(ROOT_UNIT)
    before = await state_outputs(session, ctx.keyring, run.stack_id, before_serial)
    after = await state_outputs(session, ctx.keyring, run.stack_id, after_serial)
    dependents = await session.execute(
        select(StackDependency.outputs, Stack)
        .join(Stack, Stack.id == StackDependency.stack_id)
        .where(StackDependency.upstream_stack_id == run.stack_id, Stack.deleted_at.is_(None))
        .order_by(Stack.slug)
    )
    started: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    for outputs, stack in dependents.all():
        changed = changed_outputs(before, after, outputs)
        if not changed:
            continue
        # A stack whose pushes start nothing (manual) still gets a plan: someone must see it.
        run_type = RunType.APPLY if stack.trigger == StackTrigger.APPLY else RunType.PLAN
        trigger = Trigger(kind=TriggerKind.DEPENDENCY, by=f"dependency:{upstream.slug}", upstream_run=run.id)
        try:
            # A dependent deleted meanwhile is skipped, not the trigger's other dependents.
            async with session.begin_nested():
                new = await start_run(unit, None, stack, StartRun(type=run_type), trigger=trigger)
        except FirstlumeError as error:
            skipped.append({"stack": stack.slug, "reason": error.message})
            continue
        started.append({"stack": stack.slug, "run": new.id, "outputs": changed})
    return {"started": started, "skipped": skipped, "serials": [before_serial or 0, after_serial]}


class DependencyTriggers(BackgroundService):
    """Carries out pending dependency triggers, oldest first; every replica runs one."""

    def __init__(self, ctx: Context, *, interval: float = 1.0) -> None:
        super().__init__("dependency-triggers", interval=interval, log=log)
        self.ctx = ctx

    async def run_pass(self) -> None:
        while await self.carry_out_next():
            pass

    async def carry_out_next(self) -> bool:
        """Carries out the oldest pending trigger no other replica holds; False when none is left."""
        query = (
            select(DependencyTrigger)
            .where(DependencyTrigger.done_at.is_(None))
            .order_by(DependencyTrigger.created_at, DependencyTrigger.upstream_run_id)
            .limit(1)
        )
        if not self.ctx.db.is_sqlite:
            query = query.with_for_update(skip_locked=True)
        async with self.ctx.unit() as unit:
            trigger = await unit.session.scalar(query)
            if trigger is None:
                return False
            result = await start_dependents(self.ctx, unit, trigger.upstream_run_id)
            trigger.result, trigger.done_at = result, utcnow()
            started = [s["stack"] for s in result["started"]]
        if started:
            log.info("run %s started runs of %s", trigger.upstream_run_id, ", ".join(started))
        return True
